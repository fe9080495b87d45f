//go:build unix

package server

import (
	"context"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/source"
)

// TestFIFOsDoNotHoldSlots: two GETs naming FIFOs inside the store took
// both header-read slots for good, and every later request waited behind
// them (issue #30, item 4). source refuses a FIFO by its type before
// opening it, so each slot is held for a Stat: three requests, two of
// them FIFOs, all answer 400 within 2 s.
func TestFIFOsDoNotHoldSlots(t *testing.T) {
	dir := t.TempDir()
	var refs []string
	for _, name := range []string{"a.gguf", "b.gguf", "c.gguf"} {
		p := filepath.Join(dir, name)
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		refs = append(refs, url.QueryEscape(p))
	}
	client := source.NewClient(func(string) string { return "" })
	client.CacheDir = ""
	open := func(ctx context.Context, ref string) (*arch.Model, error) {
		h, err := client.Open(ctx, ref)
		if err != nil {
			return nil, err
		}
		return arch.FromGGUF(h.Model)
	}
	srv := httptest.NewServer(newTestHandler(t, func(c *Config) { c.Open = open }))
	t.Cleanup(srv.Close)
	done := make(chan []int, 1)
	start := time.Now()
	go func() { done <- fitAll(t, srv, len(refs), func(i int) string { return refs[i] }) }()
	select {
	case codes := <-done:
		t.Logf("%d requests naming FIFOs answered %v in %v", len(refs), codes, time.Since(start).Round(time.Millisecond))
		for _, c := range codes {
			if c != 400 {
				t.Errorf("answers %v; want 400 for each", codes)
				break
			}
		}
	case <-time.After(2 * time.Second):
		t.Fatal("requests naming FIFOs still unanswered after 2 s")
	}
}
