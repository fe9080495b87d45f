// Package hubtest is a stand-in for the Hugging Face Hub in tests: the
// revision API, /resolve/ redirects to a CDN host with signed-looking
// query strings, range reads, and faults a download must survive (a
// connection dropped mid-file, a file whose bytes do not match its
// listed sha256). It counts what it served, so tests can prove that a
// refused pull moved no weights.
package hubtest

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/source"
	"github.com/headroom-llm/headroom/synth"
)

// Hub serves repositories over HTTP. Create it with New.
type Hub struct {
	URL string

	srv   *httptest.Server
	mu    sync.Mutex
	repos map[string]*repo
	blobs map[string]*File // by sha256
	// busy counts requests being answered; idle is signalled when it
	// drops to zero (Quiet).
	busy int
	idle *sync.Cond
}

type repo struct {
	commit string
	order  []string
	files  map[string]*File
}

// File is one published file and what was served of it.
type File struct {
	Name   string
	SHA256 string
	Size   int64
	// HeaderLen is how many leading bytes are the GGUF header; bytes
	// served past it are weights.
	HeaderLen int64

	content io.ReaderAt
	// dropAfter, when positive, cuts the next full-body response after
	// that many bytes, once.
	dropAfter int64
	// holdAfter, when positive, stops the next response that reaches that
	// many body bytes there, the connection open, until the client goes
	// away; held is closed when it stops.
	holdAfter int64
	held      chan struct{}
	corrupt   bool
	served    int64
	weights   int64
	ranges    []string
}

// New starts a Hub that closes when the test ends.
func New(t testing.TB) *Hub {
	h := &Hub{repos: map[string]*repo{}, blobs: map[string]*File{}}
	h.idle = sync.NewCond(&h.mu)
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	h.URL = h.srv.URL
	t.Cleanup(h.srv.Close)
	return h
}

// Add publishes content under repo/name and returns the repository's new
// commit. The sha256 listed is computed from the content.
func (h *Hub) Add(t testing.TB, repoID, name string, content []byte, headerLen int64) string {
	t.Helper()
	sum := sha256.Sum256(content)
	return h.add(repoID, &File{Name: name, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(content)),
		HeaderLen: headerLen, content: bytes.NewReader(content)})
}

// AddGGUF publishes a synth GGUF of a built-in shape. With hashed false
// the listed sha256 is a stand-in (hashing a large sparse file only slows
// a test that must never download it).
func (h *Hub) AddGGUF(t testing.TB, repoID, name, shape string, q synth.Quant, hashed bool) *File {
	t.Helper()
	s, ok := synth.Lookup(shape)
	if !ok {
		t.Fatalf("hubtest: no synth shape %q", shape)
	}
	b, err := synth.Build(s, q)
	if err != nil {
		t.Fatal(err)
	}
	r, size, err := b.ReaderAt()
	if err != nil {
		t.Fatal(err)
	}
	lay, err := b.Layout()
	if err != nil {
		t.Fatal(err)
	}
	f := &File{Name: name, Size: size, HeaderLen: lay.DataOffset, content: r}
	if hashed {
		d := sha256.New()
		if _, err := io.Copy(d, io.NewSectionReader(r, 0, size)); err != nil {
			t.Fatal(err)
		}
		f.SHA256 = hex.EncodeToString(d.Sum(nil))
	} else {
		sum := sha256.Sum256([]byte(repoID + "/" + name + strconv.FormatInt(size, 10)))
		f.SHA256 = hex.EncodeToString(sum[:])
	}
	h.add(repoID, f)
	return f
}

func (h *Hub) add(repoID string, f *File) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.repos[repoID]
	if r == nil {
		r = &repo{files: map[string]*File{}}
		h.repos[repoID] = r
	}
	if _, ok := r.files[f.Name]; !ok {
		r.order = append(r.order, f.Name)
	}
	r.files[f.Name] = f
	h.blobs[f.SHA256] = f
	c := sha1.New()
	for _, n := range r.order {
		fmt.Fprintf(c, "%s %s\n", n, r.files[n].SHA256)
	}
	r.commit = hex.EncodeToString(c.Sum(nil))
	return r.commit
}

// DropOnce makes the next response for the file that starts at byte 0 or
// later stop after n bytes by closing the connection.
func (h *Hub) DropOnce(repoID, name string, n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.repos[repoID].files[name].dropAfter = n
}

// HoldAfter makes the next response of the file that reaches n body bytes
// stop there and wait, the connection open, until its client goes away:
// a download interrupted at a known point, however fast the machine. The
// channel is closed when the response stops.
func (h *Hub) HoldAfter(repoID, name string, n int64) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.repos[repoID].files[name]
	f.holdAfter, f.held = n, make(chan struct{})
	return f.held
}

// Corrupt makes the file's served bytes differ from its listed sha256.
func (h *Hub) Corrupt(repoID, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.repos[repoID].files[name].corrupt = true
}

// Served returns the bytes served of a file, how many of them lay past its
// header, and the Range header of each request ("" for a whole-file GET).
// Served bytes are those written to the connection; a client that stops
// reading early has received fewer.
func (h *Hub) Served(repoID, name string) (total, weights int64, ranges []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.repos[repoID].files[name]
	return f.served, f.weights, append([]string(nil), f.ranges...)
}

// Client returns a source client for this Hub with its cache under a test
// directory and quick retries.
func (h *Hub) Client(t testing.TB) *source.Client {
	home := t.TempDir()
	c := source.NewClient(func(k string) string {
		return map[string]string{"HF_ENDPOINT": h.URL, "HOME": home}[k]
	})
	c.Backoff = time.Millisecond
	c.Attempts = 2
	t.Cleanup(c.HTTP.CloseIdleConnections)
	return c
}

// Quiet waits until no request is being answered. A client that stops
// reading early (a header read ahead of what it parses) leaves the
// handler writing into the connection for a while after the client is
// done; counts read before that would miss those bytes.
func (h *Hub) Quiet() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.busy > 0 {
		h.idle.Wait()
	}
}

func (h *Hub) serve(w http.ResponseWriter, req *http.Request) {
	h.mu.Lock()
	h.busy++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		if h.busy--; h.busy == 0 {
			h.idle.Broadcast()
		}
		h.mu.Unlock()
	}()
	if rest, ok := strings.CutPrefix(req.URL.Path, "/api/models/"); ok {
		h.serveAPI(w, rest)
		return
	}
	if sha, ok := strings.CutPrefix(req.URL.Path, "/cdn/"); ok {
		h.serveBlob(w, req, sha)
		return
	}
	parts := strings.SplitN(strings.TrimPrefix(req.URL.Path, "/"), "/", 5)
	if len(parts) != 5 || parts[2] != "resolve" {
		http.NotFound(w, req)
		return
	}
	h.mu.Lock()
	r := h.repos[parts[0]+"/"+parts[1]]
	var f *File
	if r != nil && (parts[3] == r.commit || parts[3] == "main") {
		f = r.files[parts[4]]
	}
	h.mu.Unlock()
	if f == nil {
		http.NotFound(w, req)
		return
	}
	// The Hub sends file reads to a CDN with a signed URL.
	http.Redirect(w, req, "/cdn/"+f.SHA256+"?X-Amz-Signature=secret", http.StatusFound)
}

func (h *Hub) serveAPI(w http.ResponseWriter, rest string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	parts := strings.SplitN(rest, "/", 4)
	var r *repo
	if len(parts) == 4 && parts[2] == "revision" {
		r = h.repos[parts[0]+"/"+parts[1]]
	}
	if r == nil || (parts[3] != "main" && parts[3] != r.commit) {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":"Repository Not Found"}`)
		return
	}
	type lfs struct {
		SHA256 string `json:"sha256"`
		Size   int64  `json:"size"`
	}
	type sib struct {
		RFilename string `json:"rfilename"`
		Size      int64  `json:"size"`
		LFS       *lfs   `json:"lfs"`
	}
	out := struct {
		SHA      string `json:"sha"`
		Siblings []sib  `json:"siblings"`
	}{SHA: r.commit}
	for _, n := range r.order {
		f := r.files[n]
		out.Siblings = append(out.Siblings, sib{RFilename: n, Size: f.Size, LFS: &lfs{SHA256: f.SHA256, Size: f.Size}})
	}
	json.NewEncoder(w).Encode(out)
}

func (h *Hub) serveBlob(w http.ResponseWriter, req *http.Request, sha string) {
	h.mu.Lock()
	f := h.blobs[sha]
	var drop int64
	var corrupt bool
	if f != nil {
		f.ranges = append(f.ranges, req.Header.Get("Range"))
		drop, f.dropAfter = f.dropAfter, 0
		corrupt = f.corrupt
	}
	h.mu.Unlock()
	if f == nil {
		http.NotFound(w, req)
		return
	}
	cw := &countingWriter{ResponseWriter: w, h: h, f: f, limit: drop, gone: req.Context().Done()}
	if rg := req.Header.Get("Range"); strings.HasPrefix(rg, "bytes=") {
		start, _, _ := strings.Cut(strings.TrimPrefix(rg, "bytes="), "-")
		cw.off, _ = strconv.ParseInt(start, 10, 64)
	}
	var content io.ReaderAt = f.content
	if corrupt {
		content = flipped{f.content}
	}
	http.ServeContent(cw, req, "", time.Time{}, io.NewSectionReader(content, 0, f.Size))
	if cw.cut {
		// Aborting the handler closes the connection mid-body, which is
		// what a dropped download looks like to the client.
		panic(http.ErrAbortHandler)
	}
}

// countingWriter counts body bytes and, with a limit, stops writing.
type countingWriter struct {
	http.ResponseWriter
	h       *Hub
	f       *File
	off     int64 // file offset of the next body byte
	limit   int64
	written int64
	cut     bool
	gone    <-chan struct{} // the request's end
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.h.mu.Lock()
	hold, held := c.f.holdAfter, c.f.held
	if hold > 0 && c.written+int64(len(p)) >= hold {
		c.f.holdAfter = 0
	} else {
		hold = 0
	}
	c.h.mu.Unlock()
	if hold > 0 {
		p = p[:hold-c.written]
	}
	if c.limit > 0 && c.written+int64(len(p)) > c.limit {
		p = p[:c.limit-c.written]
		c.cut = true
	}
	n, err := c.ResponseWriter.Write(p)
	c.h.mu.Lock()
	c.f.served += int64(n)
	if end := c.off + int64(n); end > c.f.HeaderLen {
		c.f.weights += end - max(c.off, c.f.HeaderLen)
	}
	c.h.mu.Unlock()
	c.off += int64(n)
	c.written += int64(n)
	if hold > 0 {
		if fl, ok := c.ResponseWriter.(http.Flusher); ok {
			fl.Flush()
		}
		close(held)
		<-c.gone
		c.cut = true
		return n, http.ErrAbortHandler
	}
	if c.cut {
		if fl, ok := c.ResponseWriter.(http.Flusher); ok {
			fl.Flush()
		}
		return n, http.ErrAbortHandler
	}
	return n, err
}

// flipped serves every byte inverted.
type flipped struct{ r io.ReaderAt }

func (f flipped) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.r.ReadAt(p, off)
	for i := range p[:n] {
		p[i] ^= 0xff
	}
	return n, err
}

// Commit is the repository's current commit ("" for no such repository).
func (h *Hub) Commit(repoID string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.repos[repoID]; r != nil {
		return r.commit
	}
	return ""
}

// Listed is a file as the Hub lists it now: name, size and sha256.
func (h *Hub) Listed(repoID, name string) (size int64, sha256 string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.repos[repoID]; r != nil {
		if f := r.files[name]; f != nil {
			return f.Size, f.SHA256
		}
	}
	return -1, ""
}

// Close takes the Hub off the network before the test ends, to show what
// works without it.
func (h *Hub) Close() { h.srv.Close() }
