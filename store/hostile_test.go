package store

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPullTrickleIsCutOff: a server that sends a little on every attempt
// (16 bytes every 20 ms) used to get a fresh count of attempts each time,
// since each got further than the last, and the per-byte watchdog never
// fired: the pull would run forever. Now each attempt ends after one
// window, stalled attempts are not progress, and the pull gives up after
// its attempts.
func TestPullTrickleIsCutOff(t *testing.T) {
	data := randomBytes(21, fileSize)
	o := &origin{files: map[string][]byte{"/m.gguf": data}, chunk: 16, pause: 20 * time.Millisecond}
	srv := serve(t, o)
	s := testStore(t)
	s.Timeout, s.MinBytes, s.Attempts = 300*time.Millisecond, 64<<10, 3
	start := time.Now()
	_, err := s.Pull(context.Background(), oneFile(srv, "/m.gguf", data))
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "too slow") {
		t.Fatalf("pull from a trickling server: %v; want it given up as too slow", err)
	}
	requests, served, _ := o.stats()
	if requests != 3 || took > 3*time.Second {
		t.Errorf("gave up after %d requests and %v; want 3 attempts of one 300ms window each", requests, took)
	}
	t.Logf("16 bytes every 20 ms: gave up after %v, %d requests, %d bytes", took.Round(time.Millisecond), requests, served)
}

// TestPullDeadline: a server just fast enough for the minimum rate is
// stopped by the overall deadline, with what arrived kept for next time.
func TestPullDeadline(t *testing.T) {
	data := randomBytes(22, fileSize)
	o := &origin{files: map[string][]byte{"/m.gguf": data}, chunk: 2 << 10, pause: 20 * time.Millisecond}
	srv := serve(t, o)
	s := testStore(t)
	s.Timeout, s.MinBytes, s.Deadline = 200*time.Millisecond, 1<<10, 500*time.Millisecond
	start := time.Now()
	_, err := s.Pull(context.Background(), oneFile(srv, "/m.gguf", data))
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "not finished within 500ms") || !strings.Contains(err.Error(), "kept for the next pull") {
		t.Fatalf("pull past its deadline: %v", err)
	}
	if took < 450*time.Millisecond || took > 2*time.Second {
		t.Errorf("the pull ended after %v; want about the 500ms deadline", took)
	}
}

// TestPullPermanentErrors: a redirect loop and redirects to file:// and
// gopher:// fail at the first attempt, with the store's own client.
func TestPullPermanentErrors(t *testing.T) {
	var hits atomic.Int32
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/loop.gguf":
			http.Redirect(w, r, "/loop.gguf", http.StatusFound)
		case "/file.gguf":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/gopher.gguf":
			http.Redirect(w, r, "gopher://127.0.0.1:70/x", http.StatusFound)
		}
	}))
	for _, tt := range []struct {
		path string
		hits int32
		says string
	}{
		{"/loop.gguf", 10, "stopped after 10 redirects"},
		{"/file.gguf", 1, "redirected to a file: address"},
		{"/gopher.gguf", 1, "redirected to a gopher: address"},
	} {
		t.Run(tt.path, func(t *testing.T) {
			hits.Store(0)
			s := testStore(t)
			s.HTTP = nil // the store's own client
			data := []byte("x")
			_, err := s.Pull(context.Background(), oneFile(srv, tt.path, data))
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %v; want it to say %q", err, tt.says)
			}
			if n := hits.Load(); n != tt.hits {
				t.Errorf("%d requests, want %d (one attempt)", n, tt.hits)
			}
		})
	}
}
