package cli

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/engine/enginetest"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/server"
	"github.com/headroom-llm/headroom/store"
	"github.com/headroom-llm/headroom/synth"
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
	model := storedShape(t, st, "llama-3.1-8b", synth.F16)
	snap, _ := hw.LoadMachine("rtx-4090")
	opts := plan.DefaultSearch()
	opts.Parallel, opts.Fixed.Ctx = 1, 8192
	all := 999
	opts.Fixed.GPULayers = &all
	srv := startAPI(t, st, snap, bin, opts, 20*time.Second)
	load := func() (int, string) { return postJSON(srv.URL+"/api/load", `{"model":`+quote(model)+`}`) }
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
	if code, body := postJSON(srv.URL+"/api/unload", `{"id":`+quote(inst.ID)+`}`); code != 200 {
		t.Fatalf("unload: %d %s", code, body)
	}
	if code, body := load(); code != 200 {
		t.Errorf("a load after the unload: %d %s", code, body)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
