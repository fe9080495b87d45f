package source

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/internal/httpretry"
)

// RangeReader is an io.ReaderAt over a remote file that fetches only the
// bytes read, from the start of the file: the first request asks for a
// window of bytes [0, N), and reads beyond it share ONE open-ended request
// for bytes N onward, consumed only as far as reads go. A GGUF header
// parser reads sequentially, so any header costs at most two requests
// (more only if a stream breaks and is resumed).
//
// Everything fetched stays in memory, since the parser may re-read earlier
// bytes; reads past the header limit fail with ErrHeaderTooLarge instead of
// downloading weights. The context given when opening governs every
// request, because io.ReaderAt has no place for one.
//
// A RangeReader is safe for concurrent use; Close releases the connection.
type RangeReader struct {
	o      *op
	ctx    context.Context
	url    string
	shown  string
	repo   string // for hints, when the file is in a Hub repository
	hub    bool
	window int64
	limit  int64

	mu       sync.Mutex
	size     int64
	etag     string
	buf      []byte        // bytes [0, len(buf)) of the file
	body     io.ReadCloser // open response, positioned at len(buf)
	bodyEnd  int64         // where body's range ends (exclusive)
	requests int
	fetched  int64
	resumes  int
	closed   bool
	err      error // sticky: once a read failed, all later reads fail
	// release ends the deadline OpenRange put on ctx.
	release func()
	// budget, when set, is charged for every buffer the reader takes, so
	// that what it holds and what the parser above it keeps share one
	// bound.
	budget *gguf.Budget
}

// openRange sends the first request, which also tells the file's size.
func (o *op) openRange(ctx context.Context, rawURL, repo string, hub bool) (*RangeReader, error) {
	limit := o.c.MaxHeader
	if limit <= 0 {
		limit = DefaultMaxHeader
	}
	window := o.c.InitialRead
	if window <= 0 {
		window = DefaultInitialRead
	}
	r := &RangeReader{
		o: o, ctx: ctx, url: rawURL, shown: redactURL(rawURL), repo: repo, hub: hub,
		window: min(window, limit), limit: limit, size: -1,
	}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

// Size returns the file's size, from the server's Content-Range.
func (r *RangeReader) Size() int64 { return r.size }

// Requests returns how many range requests were sent, retries included.
func (r *RangeReader) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// BytesFetched returns how many bytes of the file were received.
func (r *RangeReader) BytesFetched() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fetched
}

// ReadAt reads len(p) bytes at off, fetching what is not yet in memory.
func (r *RangeReader) ReadAt(p []byte, off int64) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if off < 0 {
		return 0, fmt.Errorf("%s: read at negative offset %d", r.shown, off)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), r.size)
	if end > int64(len(r.buf)) {
		if err := r.fill(end); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.buf[off:end])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Close ends any open request. The bytes fetched stay readable; reading
// others fails.
func (r *RangeReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closeBody()
	r.closed = true
	if r.release != nil {
		r.release()
	}
	return nil
}

// prefix returns the first n bytes fetched, or all of them if fewer were.
// After Close the buffer never changes, so the bytes are shared rather
// than copied (a copy would double a large header's cost); callers must
// not modify them.
func (r *RangeReader) prefix(n int64) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buf[:min(n, int64(len(r.buf)))]
	if !r.closed {
		b = slices.Clone(b)
	}
	return b
}

func (r *RangeReader) closeBody() {
	if r.body != nil {
		r.body.Close()
		r.body = nil
	}
}

// fill reads from the open stream, opening or resuming one as needed,
// until the first end bytes of the file are in memory.
func (r *RangeReader) fill(end int64) error {
	if r.err != nil {
		return r.err
	}
	if r.closed {
		return fmt.Errorf("%s: read of bytes up to %d after Close; only %d were fetched", r.shown, end, len(r.buf))
	}
	if end > r.limit {
		r.closeBody()
		r.err = fmt.Errorf("%s: %w: the parser asked for byte %d, past the limit of %d bytes (%d MiB) for a GGUF header",
			r.shown, ErrHeaderTooLarge, end-1, r.limit, r.limit>>20)
		return r.err
	}
	for int64(len(r.buf)) < end {
		if r.body == nil {
			if err := r.open(); err != nil {
				r.err = err
				return err
			}
		}
		pos := int64(len(r.buf))
		want := min(end, r.bodyEnd) - pos
		if err := r.grow(pos + want); err != nil {
			r.closeBody()
			r.err = err
			return err
		}
		n, err := io.ReadFull(r.body, r.buf[pos:pos+want])
		r.buf = r.buf[:pos+int64(n)]
		r.fetched += int64(n)
		if int64(len(r.buf)) == r.bodyEnd {
			r.closeBody()
			continue
		}
		if err == nil {
			continue
		}
		r.closeBody()
		if r.ctx.Err() != nil {
			r.err = fmt.Errorf("%s: %w", r.shown, context.Cause(r.ctx))
			return r.err
		}
		if r.resumes >= max(r.o.c.Attempts, 1)-1 {
			r.err = fmt.Errorf("%s: the transfer broke at byte %d and resuming failed after %d attempt(s): %w", r.shown, len(r.buf), r.resumes+1, err)
			return r.err
		}
		r.resumes++
		r.o.logf("%s: the transfer broke at byte %d (%v); resuming", r.shown, len(r.buf), err)
		if err := httpretry.Sleep(r.ctx, r.o.c.backoff(r.resumes)); err != nil {
			r.err = fmt.Errorf("%s: %w", r.shown, err)
			return r.err
		}
	}
	return nil
}

// grow makes room for the first need bytes of the file: doubling, so that
// a header read in many small steps is copied few times, but never past
// the header limit or the file. Every capacity taken is charged to the
// budget; the one left behind is garbage not yet collected.
func (r *RangeReader) grow(need int64) error {
	if need <= int64(cap(r.buf)) {
		return nil
	}
	grown := max(min(2*int64(cap(r.buf)), r.limit, r.size), need)
	if r.budget != nil {
		if err := r.budget.Charge(grown); err != nil {
			return fmt.Errorf("%s: buffering the header: %w", r.shown, err)
		}
	}
	r.buf = slices.Grow(r.buf, int(grown)-len(r.buf))
	return nil
}

// open sends a range request for the bytes from len(buf) on: to the end of
// the first window while inside it, else to the end of the file.
func (r *RangeReader) open() error {
	pos := int64(len(r.buf))
	rng := fmt.Sprintf("bytes=%d-", pos)
	if pos < r.window {
		rng += strconv.FormatInt(r.window-1, 10)
	}
	h := http.Header{}
	h.Set("Range", rng)
	// Go would otherwise ask for gzip and transparently decompress, and a
	// compressed range's offsets would not be the file's.
	h.Set("Accept-Encoding", "identity")
	resp, err := r.o.send(r.ctx, request{url: r.url, shown: r.shown, header: h, count: func() { r.requests++ }})
	if err != nil {
		return err
	}
	switch resp.StatusCode {
	case http.StatusPartialContent:
		start, last, total, ok := httpretry.ParseContentRange(resp.Header.Get("Content-Range"))
		if !ok || last < 0 || total < 0 {
			resp.Body.Close()
			return fmt.Errorf("%s: %w: asked for %s, expected a Content-Range of \"bytes %d-END/SIZE\", found %q",
				r.shown, ErrNoRangeSupport, rng, pos, resp.Header.Get("Content-Range"))
		}
		if start != pos || last >= total {
			resp.Body.Close()
			return fmt.Errorf("%s: asked for %s, but the server sent bytes %d-%d of %d", r.shown, rng, start, last, total)
		}
		if err := r.checkSame(resp, total); err != nil {
			resp.Body.Close()
			return err
		}
		r.body, r.bodyEnd = resp.Body, last+1
		return nil
	case http.StatusOK:
		resp.Body.Close()
		size := "of unknown size"
		if resp.ContentLength >= 0 {
			size = fmt.Sprintf("of %d bytes", resp.ContentLength)
		}
		return fmt.Errorf("%s: %w: asked for %s, it answered 200 OK with the whole file (%s); "+
			"headroom reads only headers and will not download whole files", r.shown, ErrNoRangeSupport, rng, size)
	case http.StatusRequestedRangeNotSatisfiable:
		// A range starting at 0 is unsatisfiable only for an empty file;
		// the parser then reports it as truncated.
		_, _, total, ok := httpretry.ParseContentRange(resp.Header.Get("Content-Range"))
		resp.Body.Close()
		if ok && total == 0 && pos == 0 {
			return r.checkSame(resp, 0)
		}
		return fmt.Errorf("%s: the server found %s unsatisfiable (Content-Range %q)", r.shown, rng, resp.Header.Get("Content-Range"))
	}
	defer resp.Body.Close()
	return r.o.statusError(resp, r.shown, r.repo, r.hub)
}

// checkSame records the file's size and ETag from the first answer and
// checks later answers against them: mixing bytes of two versions of a file
// would give a corrupt header.
func (r *RangeReader) checkSame(resp *http.Response, total int64) error {
	etag := resp.Header.Get("ETag")
	if r.size < 0 {
		r.size, r.etag = total, etag
		return nil
	}
	if total != r.size {
		return fmt.Errorf("%s: %w: its size was %d bytes, now the server says %d", r.shown, ErrFileChanged, r.size, total)
	}
	if etag != "" && r.etag != "" && etag != r.etag {
		return fmt.Errorf("%s: %w: its ETag was %s, now it is %s", r.shown, ErrFileChanged, r.etag, etag)
	}
	return nil
}
