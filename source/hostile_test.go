package source

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// trickle answers a range request for data and then sends one byte every
// gap, until the client goes away.
func trickle(data []byte, gap time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var start int
		fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-", &start)
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(data)-1, len(data)))
		w.Header().Set("Content-Length", fmt.Sprint(len(data)-start))
		w.WriteHeader(http.StatusPartialContent)
		rc := http.NewResponseController(w)
		for i := start; i < len(data); i++ {
			if _, err := w.Write(data[i : i+1]); err != nil {
				return
			}
			rc.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(gap):
			}
		}
	}
}

// TestTrickleIsCutOff: a server sending a byte every 20 ms (the issue's
// one a second, sped up) kept a header read alive forever, since every
// byte reset the watchdog. With a window of 300 ms and 64 KiB due in
// each, every attempt must end after one window, and the read after its
// attempts, within a bound.
func TestTrickleIsCutOff(t *testing.T) {
	data := ggufFile(t, 64, 0)
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		trickle(data, 20*time.Millisecond)(w, r)
	}))
	t.Cleanup(srv.Close)
	c := plainClient(t)
	c.Timeout, c.MinBytes, c.Attempts = 300*time.Millisecond, 64<<10, 3
	start := time.Now()
	_, err := c.Open(context.Background(), srv.URL+"/f.gguf")
	took := time.Since(start)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "in every 300ms") {
		t.Errorf("error %v; want ErrTimeout for too few bytes per window", err)
	}
	// Three attempts of one window each, and the backoffs between them.
	if took > 3*time.Second {
		t.Errorf("the trickled read took %v; want it cut off after 3 windows of 300ms", took)
	}
	if n := requests.Load(); n != 3 {
		t.Errorf("%d requests, want the 3 attempts", n)
	}
	t.Logf("a byte every 20 ms: failed after %v and %d requests", took.Round(time.Millisecond), requests.Load())
}

// TestDeadlineBoundsOpen: a server fast enough for the minimum rate that
// never finishes (a long header sent at just over the rate) is stopped by
// the overall deadline.
func TestDeadlineBoundsOpen(t *testing.T) {
	data := ggufFile(t, 4096, 0) // a 4 MiB vocabulary
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var start int
		fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-", &start)
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(data)-1, len(data)))
		w.Header().Set("Content-Length", fmt.Sprint(len(data)-start))
		w.WriteHeader(http.StatusPartialContent)
		rc := http.NewResponseController(w)
		for i := start; i < len(data); i += 2048 {
			if _, err := w.Write(data[i:min(i+2048, len(data))]); err != nil {
				return
			}
			rc.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}))
	t.Cleanup(srv.Close)
	c := plainClient(t)
	// 40 KiB a second against a minimum of 1 KiB per 200 ms: the rate
	// holds, the deadline must not.
	c.Timeout, c.MinBytes, c.Deadline = 200*time.Millisecond, 1<<10, time.Second
	start := time.Now()
	_, err := c.Open(context.Background(), srv.URL+"/f.gguf")
	took := time.Since(start)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "not finished within 1s") {
		t.Errorf("error %v; want the deadline's ErrTimeout", err)
	}
	if took < 900*time.Millisecond || took > 2500*time.Millisecond {
		t.Errorf("the read ended after %v; want about the 1 s deadline", took)
	}
}

// TestPermanentErrorsAreNotRetried: a redirect loop, redirects to file://
// and gopher:// and a 404 fail at the first attempt.
func TestPermanentErrorsAreNotRetried(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/loop.gguf":
			http.Redirect(w, r, "/loop.gguf", http.StatusFound)
		case "/file.gguf":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/gopher.gguf":
			http.Redirect(w, r, "gopher://127.0.0.1:70/x", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	tests := []struct {
		path string
		hits int32 // one attempt, its redirects included
		says string
	}{
		{"/loop.gguf", 10, "stopped after 10 redirects"},
		{"/file.gguf", 1, "redirected to a file: address"},
		{"/gopher.gguf", 1, "redirected to a gopher: address"},
		{"/missing.gguf", 1, "404"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			hits.Store(0)
			c := plainClient(t)
			c.Attempts = 3
			_, err := c.Open(context.Background(), srv.URL+tt.path)
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %v; want it to say %q", err, tt.says)
			}
			if n := hits.Load(); n != tt.hits {
				t.Errorf("%d requests reached the server, want %d (one attempt, never retried)", n, tt.hits)
			}
		})
	}
}
