package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// randomBytes returns n bytes that differ per seed.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// origin serves files like a CDN, with faults on demand, and records
// what it was asked and what it sent.
type origin struct {
	files map[string][]byte // by URL path

	// ignoreRange answers every request with the whole file, as a server
	// without range support does.
	ignoreRange bool
	// noLength sends no Content-Length.
	noLength bool
	// statuses are answered, in order, to the first requests.
	statuses []int
	// chunk and pause throttle the body.
	chunk int
	pause time.Duration
	// cut, when set, takes over the first request that sends content
	// once cutAt body bytes have been written and flushed.
	cutAt int64
	cut   func(w http.ResponseWriter, r *http.Request)
	// cutEvery cuts every request that sends content, not only the first.
	cutEvery bool

	mu       sync.Mutex
	requests int
	served   int64
	ranges   []string
	agents   []string
	cutDone  bool
}

func (o *origin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.requests++
	n := o.requests
	o.ranges = append(o.ranges, r.Header.Get("Range"))
	o.agents = append(o.agents, r.Header.Get("User-Agent"))
	o.mu.Unlock()
	if n <= len(o.statuses) {
		http.Error(w, "not now", o.statuses[n-1])
		return
	}
	data, ok := o.files[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	start := int64(0)
	if rg := r.Header.Get("Range"); rg != "" && !o.ignoreRange {
		v, found := strings.CutPrefix(rg, "bytes=")
		v, found2 := strings.CutSuffix(v, "-")
		s, err := strconv.ParseInt(v, 10, 64)
		if !found || !found2 || err != nil {
			http.Error(w, "bad range", http.StatusBadRequest)
			return
		}
		if s >= int64(len(data)) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(data)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start = s
	}
	body := data[start:]
	if !o.noLength {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if start > 0 {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(data)-1, len(data)))
		w.WriteHeader(http.StatusPartialContent)
	} else {
		w.WriteHeader(http.StatusOK)
	}
	o.mu.Lock()
	cutHere := o.cut != nil && (!o.cutDone || o.cutEvery)
	o.cutDone = o.cutDone || cutHere
	o.mu.Unlock()
	chunk := o.chunk
	if chunk <= 0 {
		chunk = 32 << 10
	}
	var written int64
	for len(body) > 0 {
		if cutHere && written >= o.cutAt {
			w.(http.Flusher).Flush()
			o.cut(w, r)
			return
		}
		k := min(len(body), chunk)
		if cutHere {
			k = int(min(int64(k), o.cutAt-written))
		}
		if _, err := w.Write(body[:k]); err != nil {
			return
		}
		o.mu.Lock()
		o.served += int64(k)
		o.mu.Unlock()
		written += int64(k)
		body = body[k:]
		w.(http.Flusher).Flush()
		if o.pause > 0 {
			time.Sleep(o.pause)
		}
	}
}

func (o *origin) stats() (requests int, served int64, ranges []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.requests, o.served, append([]string(nil), o.ranges...)
}

// drop closes the connection under a response, as a network failure does.
func drop(w http.ResponseWriter, r *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

// stall sends nothing more until the client gives up.
func stall(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
}

func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// testStore opens a store in a fresh directory with fast retries and
// plenty of free space.
func testStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	s.HTTP = &http.Client{Transport: tr}
	s.Backoff = time.Millisecond
	s.Timeout = 5 * time.Second
	s.Free = func(string) (int64, error) { return 1 << 50, nil }
	return s
}

// oneFile is an artifact of one file served by srv at /path.
func oneFile(srv *httptest.Server, path string, data []byte) Artifact {
	return Artifact{
		Ref:    "hf:owner/model",
		Repo:   "owner/model",
		Commit: "0123456789abcdef0123456789abcdef01234567",
		Files:  []File{{Name: filepath.Base(path), URL: srv.URL + path, Size: int64(len(data)), SHA256: digest(data)}},
	}
}

// entries lists the names in dir, or none when it does not exist.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// checkInstalled asserts that in is a complete install of data.
func checkInstalled(t *testing.T, s *Store, in Installed, data []byte, verified bool) {
	t.Helper()
	if in.SHA256 != digest(data) || in.Size != int64(len(data)) || in.Verified != verified {
		t.Fatalf("installed %+v, expected sha256 %s, size %d, verified %v", in, digest(data), len(data), verified)
	}
	if in.Blob != s.blobPath(in.SHA256) {
		t.Fatalf("blob %s, expected %s", in.Blob, s.blobPath(in.SHA256))
	}
	for _, p := range []string{in.Blob, in.Path} {
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if digest(got) != digest(data) {
			t.Fatalf("%s: content differs from the served file", p)
		}
	}
	fi, err := os.Stat(in.Blob)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o444 {
		t.Fatalf("blob mode %v, expected 0444", fi.Mode().Perm())
	}
	if !s.Contains(in.Path) || !s.Contains(in.Blob) {
		t.Fatalf("%s or %s outside the store %s", in.Path, in.Blob, s.Root)
	}
}
