package store

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/headroom-llm/headroom/internal/httpretry"
)

const (
	// maxBackoff caps the doubling wait between retries.
	maxBackoff = 30 * time.Second
	// maxRetryAfter bounds how long a server may ask us to wait; one
	// asking for more is treated as down.
	maxRetryAfter = 2 * time.Minute
	copyBuffer    = 256 << 10
	userAgent     = "headroom"
)

// transient is a failure that a later attempt, resuming from what is on
// disk, may get past. wait is the least time the server asked for.
type transient struct {
	err  error
	wait time.Duration
}

func (t *transient) Error() string { return t.err.Error() }
func (t *transient) Unwrap() error { return t.err }

// stalled is why an attempt was cancelled: less than the store's minimum
// arrived in a window. A per-byte watchdog would let a server that
// trickles a byte at a time hold the download forever; a fixed deadline
// alone would cut off a slow but healthy one.
type stalled struct{ slow *httpretry.TooSlow }

func (e *stalled) Error() string { return "too slow: " + e.slow.Error() }

// dl is the state of one file's download.
type dl struct {
	j    job
	f    *os.File
	h    hash.Hash
	side sidecar
	rep  *reporter
	// n bytes are on disk and in h.
	n int64
	// resumed bytes were on disk when the current run of bytes began.
	resumed int64
	// total is the size shown in progress: the expected size, or what
	// the server announced when that is unknown.
	total int64
	// reached says a server answered this file's requests in this run:
	// after that a failed connection is a network that dropped in the
	// middle of a transfer, worth retrying, not one that is not there.
	reached bool
}

// obtain makes sure one file's blob is present and verified, downloading
// it if need be, and links it at path, all under the file's lock. The
// blob's stamp is written after the link, the store's last change to it.
func (s *Store) obtain(ctx context.Context, j job, path string) (Installed, error) {
	rep := s.reporter(ctx, j)
	release, err := s.acquire(ctx, s.lockPath(j.key), rep.waiting)
	if err != nil {
		return Installed{}, s.lockError(ctx, j, err)
	}
	defer release()
	in := Installed{Name: j.file.Name, Path: path}
	phase := PhaseDone
	if j.want != "" {
		size, ok, altered, err := s.present(ctx, j.want, j.file.Size, rep)
		if err != nil {
			return Installed{}, fmt.Errorf("%s: %w", j.file.Name, err)
		}
		in.Altered = altered
		if ok {
			in.SHA256, in.Size, in.Blob, in.Verified, in.AlreadyPresent = j.want, size, s.blobPath(j.want), true, true
			phase = PhasePresent
		}
	}
	if !in.AlreadyPresent {
		sum, size, err := s.download(ctx, j, rep)
		if err != nil {
			return Installed{}, err
		}
		blob, err := s.install(ctx, j, sum, size, rep)
		if err != nil {
			return Installed{}, err
		}
		in.SHA256, in.Size, in.Blob, in.Verified = sum, size, blob, j.want != ""
	}
	if err := s.mkdirAll(filepath.Dir(path)); err != nil {
		return Installed{}, fmt.Errorf("model store: creating %s: %w", filepath.Dir(path), err)
	}
	if err := s.link(in.Blob, path); err != nil {
		return Installed{}, err
	}
	if err := s.writeStamp(in.SHA256); err != nil {
		return Installed{}, fmt.Errorf("%s: %w", j.file.Name, err)
	}
	rep.final(phase, in.Size)
	return in, nil
}

// lockError says why a file's lock was not taken: the wait was
// interrupted, or the store cannot be written at all.
func (s *Store) lockError(ctx context.Context, j job, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: waiting for another download of it: %w", j.file.Name, err)
	}
	if ro := readOnly(err); ro != "" {
		return fmt.Errorf("%s: the store at %s is %s: %w", j.file.Name, s.Root, ro, err)
	}
	return fmt.Errorf("%s: locking its download: %w", j.file.Name, err)
}

// download brings a file's part to completion and checks it. It returns
// the part's digest and size; the part is discarded when it turns out
// wrong and kept when the download is merely interrupted.
func (s *Store) download(ctx context.Context, j job, rep *reporter) (string, int64, error) {
	part := s.partPath(j.key)
	f, err := s.openPart(part)
	if err != nil {
		return "", 0, fmt.Errorf("%s: opening partial download: %w", j.file.Name, err)
	}
	d := &dl{j: j, f: f, h: sha256.New(), rep: rep, total: j.file.Size,
		side: sidecar{URL: redactURL(j.file.URL), Size: j.file.Size, SHA256: j.want}}
	err = s.resume(ctx, d)
	if err == nil {
		err = s.fetch(ctx, d)
	}
	if err == nil {
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("%s: saving %s: %w", j.file.Name, part, err)
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("%s: saving %s: %w", j.file.Name, part, cerr)
	}
	var se *SizeError
	if errors.As(err, &se) {
		s.discard(j.key)
	}
	if err != nil {
		return "", 0, err
	}
	sum := hex.EncodeToString(d.h.Sum(nil))
	if j.want != "" && sum != j.want {
		s.discard(j.key)
		return "", 0, &ChecksumError{File: j.file.Name, Want: j.want, Got: sum}
	}
	return sum, d.n, nil
}

// openPart creates the part exclusively, or opens the one an earlier run
// left, which must be a plain file of the store's.
func (s *Store) openPart(part string) (*os.File, error) {
	f, err := s.openFile(part, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if !errors.Is(err, fs.ErrExist) {
		return f, err
	}
	fi, err := s.lstat(part)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("model store: expected a partial download at %s, found a %s", part, fi.Mode().Type())
	}
	// A part has one name; a second is a hard link planted to have the
	// download written into a file elsewhere on the same filesystem.
	if n := hardLinks(fi); n != 1 {
		return nil, fmt.Errorf("model store: expected a partial download at %s with one name, found %d hard links to it; the store writes into no file named elsewhere (remove it)", part, n)
	}
	// A crash between marking a part read-only and renaming it leaves it
	// unwritable; it is ours, so take it back.
	if fi.Mode().Perm()&0o200 == 0 {
		if err := s.chmod(part, 0o644); err != nil {
			return nil, err
		}
	}
	return s.openFile(part, os.O_RDWR, 0)
}

// resume keeps what a previous run left in the part when it belongs to the
// same file, and hashes it so that the digest covers the whole file.
func (s *Store) resume(ctx context.Context, d *dl) error {
	fi, err := d.f.Stat()
	if err != nil {
		return fmt.Errorf("%s: partial download: %w", d.j.file.Name, err)
	}
	n := fi.Size()
	old := s.readSidecar(s.sidePath(d.j.key))
	keep := n > 0 && old != nil && old.matches(d.side) && (d.total < 0 || n <= d.total)
	if keep {
		d.side.ETag = old.ETag
	} else if n > 0 {
		if err := d.f.Truncate(0); err != nil {
			return fmt.Errorf("%s: discarding a stale partial download: %w", d.j.file.Name, err)
		}
		n = 0
	}
	if err := s.writeSidecar(d); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	d.resumed = n
	d.rep.verify(0, n)
	r := &ctxReader{ctx: ctx, r: io.NewSectionReader(d.f, 0, n), seen: func(k int64) { d.rep.verify(k, n) }}
	if _, err := io.Copy(d.h, r); err != nil {
		if ctx.Err() != nil {
			return d.interrupted(ctx)
		}
		return fmt.Errorf("%s: reading the partial download: %w", d.j.file.Name, err)
	}
	d.n = n
	return nil
}

// fetch sends requests until the part is complete, retrying transient
// failures with a doubling wait.
func (s *Store) fetch(ctx context.Context, d *dl) error {
	attempts := max(s.Attempts, 1)
	deadline := s.Deadline
	if deadline <= 0 {
		deadline = DefaultDeadline
	}
	ctx, cancel := context.WithTimeoutCause(ctx, deadline, fmt.Errorf("not finished within %v (Store.Deadline)", deadline))
	defer cancel()
	// best is the furthest the part has got; only going beyond it counts
	// as progress, so a server that drops every connection and cannot
	// resume still runs out of attempts.
	best := d.n
	for fails := 0; ; {
		if d.j.file.Size >= 0 && d.n == d.j.file.Size {
			return nil
		}
		err := s.attempt(ctx, d)
		if err == nil {
			return nil
		}
		var t *transient
		if !errors.As(err, &t) {
			return err
		}
		// A stalled attempt moved too little to count as progress, or a
		// trickling server would get a fresh count of attempts forever.
		var st *stalled
		if d.n > best && !errors.As(err, &st) {
			best, fails = d.n, 0
		}
		fails++
		where := fmt.Sprintf("downloading %s from %s", d.j.file.Name, redactURL(d.j.file.URL))
		if t.wait > maxRetryAfter {
			return fmt.Errorf("%s: %v, and the server asked to retry after %v; try again later", where, t.err, t.wait)
		}
		if fails >= attempts {
			return fmt.Errorf("%s: gave up after %d failed attempts in a row, %d bytes kept for the next pull: %w", where, fails, d.n, t.err)
		}
		if err := httpretry.Sleep(ctx, max(t.wait, s.backoff(fails))); err != nil {
			return d.interrupted(ctx)
		}
	}
}

// attempt sends one request from the current offset and appends what
// arrives to the part.
func (s *Store) attempt(ctx context.Context, d *dl) error {
	rate := httpretry.Rate{MinBytes: s.MinBytes, Window: s.Timeout}
	actx, watch := rate.Watch(ctx, func(e error) error {
		slow, _ := e.(*httpretry.TooSlow)
		return &stalled{slow}
	})
	defer watch.Stop()

	req, err := http.NewRequestWithContext(actx, http.MethodGet, d.j.file.URL, nil)
	if err != nil {
		// The parse error would repeat the URL with its query.
		return fmt.Errorf("%s: expected an http or https URL, got %s", d.j.file.Name, redactURL(d.j.file.URL))
	}
	req.Header.Set("User-Agent", userAgent)
	// Transparent decompression would make byte offsets meaningless.
	req.Header.Set("Accept-Encoding", "identity")
	if d.n > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(d.n, 10)+"-")
		// Without a digest to check at the end, a file that changed on
		// the server must not be stitched onto an old part.
		if d.j.want == "" && d.side.ETag != "" {
			req.Header.Set("If-Range", d.side.ETag)
		}
	}
	hc := s.HTTP
	if hc == nil {
		hc = &http.Client{CheckRedirect: httpretry.CheckRedirect}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return d.netError(ctx, actx, err)
	}
	defer resp.Body.Close()
	d.reached = true
	if complete, err := s.accept(d, resp); err != nil || complete {
		return err
	}
	d.rep.download(d.n, d.total, d.resumed)

	buf := make([]byte, copyBuffer)
	for {
		k, rerr := resp.Body.Read(buf)
		if k > 0 {
			watch.Add(k)
			if d.j.file.Size >= 0 && d.n+int64(k) > d.j.file.Size {
				return &SizeError{File: d.j.file.Name, Want: d.j.file.Size, Got: d.n + int64(k)}
			}
			if _, err := d.f.WriteAt(buf[:k], d.n); err != nil {
				return fmt.Errorf("%s: writing the partial download: %w", d.j.file.Name, err)
			}
			d.h.Write(buf[:k])
			d.n += int64(k)
			d.rep.download(d.n, d.total, d.resumed)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return d.netError(ctx, actx, rerr)
		}
	}
	if d.total >= 0 && d.n < d.total {
		return &transient{err: fmt.Errorf("the connection ended after %d of %d bytes", d.n, d.total)}
	}
	return nil
}

// accept checks a response's status and headers against the request and
// the expected file, restarting the part when the server sends the file
// from its beginning. complete says the part already holds the whole file.
func (s *Store) accept(d *dl, resp *http.Response) (complete bool, err error) {
	name := d.j.file.Name
	want := d.j.file.Size
	announced := int64(-1)
	switch code := resp.StatusCode; {
	case code == http.StatusPartialContent:
		start, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok {
			return false, d.restart(fmt.Errorf("asked for bytes %d-, the server answered 206 with Content-Range %q", d.n, resp.Header.Get("Content-Range")))
		}
		if want >= 0 && total >= 0 && total != want {
			return false, &SizeError{File: name, Want: want, Got: total, Announced: true}
		}
		switch {
		case start == d.n:
		case start == 0:
			if err := d.restart(nil); err != nil {
				return false, err
			}
		default:
			return false, d.restart(fmt.Errorf("asked for bytes %d-, the server sent bytes %d-", d.n, start))
		}
		announced = total
	case code == http.StatusOK:
		if d.n > 0 {
			// No range support, or If-Range found the file changed.
			if err := d.restart(nil); err != nil {
				return false, err
			}
		}
		if want >= 0 && resp.ContentLength >= 0 && resp.ContentLength != want {
			return false, &SizeError{File: name, Want: want, Got: resp.ContentLength, Announced: true}
		}
		announced = resp.ContentLength
	case code == http.StatusRequestedRangeNotSatisfiable && d.n > 0:
		// A part of unknown size may already hold the whole file.
		if total, ok := parseUnsatisfied(resp.Header.Get("Content-Range")); ok && want < 0 && total == d.n {
			d.total = total
			return true, nil
		}
		return false, d.restart(fmt.Errorf("the server refused the range bytes=%d-", d.n))
	case httpretry.Transient(code):
		wait, _ := httpretry.RetryAfter(resp.Header.Get("Retry-After"))
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return false, &transient{err: fmt.Errorf("the server answered %d %s", code, http.StatusText(code)), wait: wait}
	default:
		return false, &HTTPError{File: name, URL: redactURL(d.j.file.URL), StatusCode: code}
	}
	if want < 0 {
		d.total = announced
	}
	if d.j.want == "" {
		etag := resp.Header.Get("ETag")
		if strings.HasPrefix(etag, "W/") {
			etag = "" // If-Range needs a strong validator
		}
		if etag != d.side.ETag {
			d.side.ETag = etag
			return false, s.writeSidecar(d)
		}
	}
	return false, nil
}

// restart empties the part so that the download starts over. cause, when
// not nil, is returned as a transient failure.
func (d *dl) restart(cause error) error {
	if err := d.f.Truncate(0); err != nil {
		return fmt.Errorf("%s: restarting the download: %w", d.j.file.Name, err)
	}
	d.h.Reset()
	d.n, d.resumed = 0, 0
	if cause != nil {
		return &transient{err: cause}
	}
	return nil
}

// netError sorts a transport error: cancellation is final and keeps the
// part, anything else is worth another attempt.
func (d *dl) netError(ctx, actx context.Context, err error) error {
	if ctx.Err() != nil {
		return d.interrupted(ctx)
	}
	var st *stalled
	if errors.As(context.Cause(actx), &st) {
		return &transient{err: st}
	}
	// url.Error repeats the URL, which after a redirect is a signed one.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var cert *tls.CertificateVerificationError
	if errors.As(err, &cert) || httpretry.IsPermanent(err) {
		return fmt.Errorf("downloading %s from %s: %w", d.j.file.Name, redactURL(d.j.file.URL), err)
	}
	// A name that does not resolve or a connection refused gives the same
	// answer a minute later: say so now rather than after every backoff.
	if !d.reached && httpretry.Unreachable(err) {
		return &UnreachableError{File: d.j.file.Name, URL: redactURL(d.j.file.URL), Kept: d.n, Err: err}
	}
	return &transient{err: err}
}

func (d *dl) interrupted(ctx context.Context) error {
	return fmt.Errorf("downloading %s: stopped with %d bytes on disk, kept for the next pull: %w", d.j.file.Name, d.n, context.Cause(ctx))
}

// backoff returns the wait before retry number fails (1-based).
func (s *Store) backoff(fails int) time.Duration {
	b := max(s.Backoff, 0)
	for i := 1; i < fails && b < maxBackoff; i++ {
		b *= 2
	}
	return min(b, maxBackoff)
}
