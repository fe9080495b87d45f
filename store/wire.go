package store

import (
	"context"
	"io"

	"github.com/headroom-llm/headroom/internal/httpretry"
)

// parseContentRange reads a 206's Content-Range: where the answer starts
// and the file's size (-1 if the server gave "*"), refusing a range that
// ends outside the size it announces.
func parseContentRange(v string) (start, total int64, ok bool) {
	first, last, size, ok := httpretry.ParseContentRange(v)
	if !ok || last < 0 || (size >= 0 && size <= last) {
		return 0, 0, false
	}
	return first, size, true
}

// parseUnsatisfied parses the "bytes */total" of a 416 answer.
func parseUnsatisfied(v string) (total int64, ok bool) {
	_, last, size, ok := httpretry.ParseContentRange(v)
	return size, ok && last < 0
}

// ctxReader stops a long read when ctx is done and reports how far it got.
type ctxReader struct {
	ctx  context.Context
	r    io.Reader
	n    int64
	seen func(int64)
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	k, err := c.r.Read(p)
	c.n += int64(k)
	c.seen(c.n)
	// Cancelled while this read ran (by whoever watches the progress, or
	// on the last read, which may end the body): the bytes read are kept
	// and the download stops as interrupted, not as finished.
	if cerr := c.ctx.Err(); cerr != nil && (err == nil || err == io.EOF) {
		return k, cerr
	}
	return k, err
}
