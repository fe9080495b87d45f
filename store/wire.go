package store

import (
	"context"
	"io"
	"strconv"
	"strings"
	"time"
)

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// parseContentRange parses "bytes start-end/total"; total is -1 for "*".
func parseContentRange(v string) (start, total int64, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSpace(v), "bytes ")
	if !found {
		return 0, 0, false
	}
	span, size, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, false
	}
	first, last, found := strings.Cut(span, "-")
	if !found {
		return 0, 0, false
	}
	start, err1 := strconv.ParseInt(first, 10, 64)
	end, err2 := strconv.ParseInt(last, 10, 64)
	if err1 != nil || err2 != nil || start < 0 || end < start {
		return 0, 0, false
	}
	total = -1
	if size != "*" {
		t, err := strconv.ParseInt(size, 10, 64)
		if err != nil || t <= end {
			return 0, 0, false
		}
		total = t
	}
	return start, total, true
}

// parseUnsatisfied parses the "bytes */total" of a 416 answer.
func parseUnsatisfied(v string) (total int64, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSpace(v), "bytes */")
	if !found {
		return 0, false
	}
	t, err := strconv.ParseInt(rest, 10, 64)
	return t, err == nil && t >= 0
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
	return k, err
}
