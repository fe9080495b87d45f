package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/engine/enginetest"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/synth"
	"github.com/headroom-llm/headroom/launch"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/server"
	"github.com/headroom-llm/headroom/source"
	"github.com/headroom-llm/headroom/store"
)

// TestAPILoadsUnderConcurrency sends 50 loads at once of a model that fits
// the machine only once (Llama-3.1-8B F16, all layers on a 24 GiB card)
// through the HTTP API: one starts, 49 are refused with 409, and after an
// unload the next load starts.
func TestAPILoadsUnderConcurrency(t *testing.T) {
	t.Setenv("FAKE_LLAMA_MODE", "good")
	t.Setenv("FAKE_LLAMA_LOAD_MS", "50")
	bin := enginetest.BuildFake(t)
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// A file already in the store, so the loads download nothing.
	s, _ := synth.Lookup("llama-3.1-8b")
	b, err := synth.Build(s, synth.F16)
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(st.Root, "models", "local", "Llama-3.1-8B-F16.gguf")
	if err := os.MkdirAll(filepath.Dir(model), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteFile(model); err != nil {
		t.Fatal(err)
	}
	snap, _ := hw.LoadMachine("rtx-4090")
	cat, _ := catalog.Load()
	d := &launch.Deps{Client: source.NewClient(func(string) string { return "" }), Catalog: cat,
		Machine: func(context.Context) (*hw.Snapshot, error) { return snap, nil }, Cache: &admission.Cache{}}
	opts := plan.DefaultSearch()
	opts.Parallel, opts.Fixed.Ctx = 1, 8192
	all := 999
	opts.Fixed.GPULayers = &all
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt := &apiRuntime{base: ctx, d: d, st: st, bin: bin, opts: opts, ready: 20 * time.Second, ledger: sharedLedger(st)}
	defer rt.stopAll(context.Background())
	h, err := server.New(server.Config{Machine: d.Machine, Catalog: cat, Open: rt.open, Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	load := func() (int, string) {
		resp, err := http.Post(srv.URL+"/api/load", "application/json", strings.NewReader(`{"model":`+quote(model)+`}`))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		status = map[int]int{}
		ok     string
	)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body := load()
			mu.Lock()
			defer mu.Unlock()
			status[code]++
			if code == 200 {
				ok = body
			} else if code != 409 {
				t.Errorf("load answered %d: %s", code, body)
			}
		}()
	}
	wg.Wait()
	if status[200] != 1 || status[409] != 49 {
		t.Fatalf("50 concurrent loads: statuses %v; want one 200 and 49 409", status)
	}
	var inst server.Instance
	if err := json.Unmarshal([]byte(ok), &inst); err != nil || inst.State != "ready" || inst.URL == "" {
		t.Fatalf("the admitted load: %v %s", err, ok)
	}
	if code, body := load(); code != 409 || !strings.Contains(body, "beside 1 model") {
		t.Errorf("a load beside the running one: %d %s", code, body)
	}
	resp, err := http.Post(srv.URL+"/api/unload", "application/json", strings.NewReader(`{"id":`+quote(inst.ID)+`}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("unload: %v %v", resp, err)
	}
	resp.Body.Close()
	if code, body := load(); code != 200 {
		t.Errorf("a load after the unload: %d %s", code, body)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
