package store

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestPartOfUnknownSizeAlreadyComplete: a part of a file of unknown size
// that already holds the whole file is finished by the server's 416,
// without downloading it again.
func TestPartOfUnknownSizeAlreadyComplete(t *testing.T) {
	data := randomBytes(50, 64<<10)
	o := &origin{files: map[string][]byte{"/m.gguf": data}}
	srv := serve(t, o)
	s := testStore(t)
	a := Artifact{Files: []File{{Name: "m.gguf", URL: srv.URL + "/m.gguf", Size: -1}}}
	p, err := s.prepare(a)
	if err != nil {
		t.Fatal(err)
	}
	key := p.jobs[0].key
	if err := os.WriteFile(s.partPath(key), data, 0o644); err != nil {
		t.Fatal(err)
	}
	side := `{"url":"` + redactURL(a.Files[0].URL) + `","size":-1}`
	if err := os.WriteFile(s.sidePath(key), []byte(side), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := s.Pull(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, s, m.Files[0], data, false)
	requests, served, ranges := o.stats()
	if requests != 1 || served != 0 || ranges[0] != "bytes="+strconv.Itoa(len(data))+"-" {
		t.Errorf("%d requests %q served %d bytes, expected one range request past the end and nothing served", requests, ranges, served)
	}
}

// TestChangedFileIsNotStitched: without a digest, a resumed download asks
// with If-Range, and a file that changed meanwhile is downloaded whole
// instead of appended to the old part.
func TestChangedFileIsNotStitched(t *testing.T) {
	v1 := randomBytes(51, fileSize)
	v2 := randomBytes(52, fileSize)
	var mu sync.Mutex
	var ifRange []string
	first := true
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ifRange = append(ifRange, r.Header.Get("If-Range"))
		wasFirst := first
		first = false
		mu.Unlock()
		if wasFirst {
			w.Header().Set("ETag", `"v1"`)
			w.Header().Set("Content-Length", strconv.Itoa(len(v1)))
			w.WriteHeader(http.StatusOK)
			w.Write(v1[:fileSize/2])
			w.(http.Flusher).Flush()
			drop(w, r)
			return
		}
		// ServeContent honours Range and If-Range against this ETag.
		w.Header().Set("ETag", `"v2"`)
		http.ServeContent(w, r, "m.gguf", time.Time{}, bytes.NewReader(v2))
	}))
	s := testStore(t)
	a := Artifact{Files: []File{{Name: "m.gguf", URL: srv.URL + "/m.gguf", Size: -1}}}
	m, err := s.Pull(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, s, m.Files[0], v2, false)
	if len(ifRange) != 2 || ifRange[1] != `"v1"` {
		t.Errorf("If-Range headers %q, expected the first answer's ETag on the resume", ifRange)
	}
}
