package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/internal/ggufattack"
	"github.com/headroom-llm/headroom/source"
)

// fitAll sends n GET /api/fit requests at once, for ref(i), and waits.
func fitAll(t *testing.T, srv *httptest.Server, n int, ref func(int) string) []int {
	t.Helper()
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(srv.URL + "/api/fit?model=" + ref(i))
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	return codes
}

// TestOpensAreBoundedAndShared: eight requests naming eight models read at
// most DefaultMaxOpens at once; eight naming one read it once, and a later
// request reads it not at all.
func TestOpensAreBoundedAndShared(t *testing.T) {
	var calls, running, peak atomic.Int32
	open := func(ctx context.Context, ref string) (*arch.Model, error) {
		calls.Add(1)
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
		running.Add(-1)
		return nil, fmt.Errorf("no model %s", ref)
	}
	srv := httptest.NewServer(newTestHandler(t, func(c *Config) { c.Open = open }))
	t.Cleanup(srv.Close)

	fitAll(t, srv, 8, func(i int) string { return fmt.Sprintf("hf:evil/repo-%d", i) })
	if calls.Load() != 8 || peak.Load() > DefaultMaxOpens {
		t.Errorf("8 models: %d opens, at most %d at once; want 8, at most %d", calls.Load(), peak.Load(), DefaultMaxOpens)
	}
	calls.Store(0)
	fitAll(t, srv, 8, func(int) string { return "hf:evil/same" })
	fitAll(t, srv, 1, func(int) string { return "hf:evil/same" })
	if calls.Load() != 1 {
		t.Errorf("9 requests for one model opened it %d times, want once", calls.Load())
	}
}

// TestHostileHeaderOverAPI: four GETs at once naming a repository whose
// header is an array of 5.5M empty sub-arrays took serve-api from 68 MB to
// 3.57 GB. Now the four share one read, held to the header budget.
func TestHostileHeaderOverAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates up to 256 MiB")
	}
	g := ggufattack.Nested()
	var served atomic.Int32
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, r, "", time.Time{}, io.NewSectionReader(g, 0, g.Size))
	}))
	t.Cleanup(hub.Close)
	client := source.NewClient(func(string) string { return "" })
	client.Endpoint, client.CacheDir = "https://hub.invalid", ""
	t.Cleanup(client.HTTP.CloseIdleConnections)
	open := func(ctx context.Context, ref string) (*arch.Model, error) {
		h, err := client.Open(ctx, strings.TrimPrefix(ref, "evil:"))
		if err != nil {
			return nil, err
		}
		return arch.FromGGUF(h.Model)
	}
	srv := httptest.NewServer(newTestHandler(t, func(c *Config) { c.Open = open }))
	t.Cleanup(srv.Close)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	codes := fitAll(t, srv, 4, func(int) string { return "evil:" + hub.URL + "/nested.gguf" })
	runtime.ReadMemStats(&after)
	n := after.TotalAlloc - before.TotalAlloc
	t.Logf("4 requests at once for the nested-array header: %d MiB allocated in all, answers %v, %d range requests", n>>20, codes, served.Load())
	for _, c := range codes {
		if c != 400 {
			t.Errorf("answers %v; want 400 (the header is refused) for each", codes)
			break
		}
	}
	const slack = 16 << 20 // the server's and the planner's own work
	if n > gguf.DefaultMaxAlloc+slack {
		t.Errorf("four requests allocated %d bytes; want one read's budget, %d", n, gguf.DefaultMaxAlloc)
	}
}
