package cli

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/server"
	"github.com/headroom-llm/headroom/store"
	"github.com/headroom-llm/headroom/synth"
)

// TestLiveAPITwoAdmittedThirdRefused loads one model three times through
// the HTTP API and the real llama-server, on a machine whose memory holds
// two such loads: two start and answer completions, the third is refused
// before a third llama-server starts, and an unload stops a server and
// lets the next load in.
func TestLiveAPITwoAdmittedThirdRefused(t *testing.T) {
	bin := liveEngine(t)
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	model := storedShape(t, st, "tinyllama-1.1b", synth.Q4_K_M)
	opts := plan.DefaultSearch()
	opts.Parallel, opts.Fixed.Ctx = 1, 2048
	// The engine check runs as serve-api runs it: the llama-fit-params
	// beside llama-server, when the build has one.
	fitParams, _ := engine.FindFitParams(bin, nil)
	srv := startAPI(t, st, twoLoadMachine(t, "tinyllama-1.1b", synth.Q4_K_M, opts), bin, fitParams, opts, 3*time.Minute)
	post := func(path, body string) (int, string) { return postJSON(srv.URL+path, body) }
	var running []server.Instance
	for i := range 2 {
		code, body := post("/api/load", `{"model":`+quote(model)+`}`)
		var inst server.Instance
		if code != 200 || json.Unmarshal([]byte(body), &inst) != nil || inst.State != "ready" {
			t.Fatalf("load %d: %d %s", i+1, code, body)
		}
		running = append(running, inst)
	}
	if pids := enginesServing(t, model); len(pids) != 2 {
		t.Errorf("%d llama-server processes serve the model, want 2", len(pids))
	}
	// Each answers a completion of its own.
	for _, inst := range running {
		resp, err := http.Post(inst.URL+"/completion", "application/json", strings.NewReader(`{"prompt":"Hi","n_predict":1}`))
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("%s: completion: %v %v", inst.URL, resp, err)
		} else {
			resp.Body.Close()
		}
	}
	if code, body := post("/api/load", `{"model":`+quote(model)+`}`); code != 409 {
		t.Errorf("a third load beside two: %d %s, want 409", code, body)
	}
	if pids := enginesServing(t, model); len(pids) != 2 {
		t.Errorf("after the refused load %d llama-server processes serve the model, want 2", len(pids))
	}
	if code, body := post("/api/unload", `{"id":`+quote(running[0].ID)+`}`); code != 200 {
		t.Fatalf("unload: %d %s", code, body)
	}
	if pids := enginesServing(t, model); len(pids) != 1 {
		t.Errorf("after an unload %d llama-server processes serve the model, want 1", len(pids))
	}
	if code, body := post("/api/load", `{"model":`+quote(model)+`}`); code != 200 {
		t.Errorf("a load after the unload: %d %s", code, body)
	}
}

// twoLoadMachine is this machine's kind (CPU only, AVX2) with just enough
// memory for two loads of the model under opts and not three, found with
// the same admission ledger the API uses.
func twoLoadMachine(t testing.TB, shape string, q synth.Quant, opts plan.SearchOptions) *hw.Snapshot {
	t.Helper()
	sh, _ := synth.Lookup(shape)
	m, err := synth.Model(sh, q)
	if err != nil {
		t.Fatal(err)
	}
	base, err := hw.LoadMachine("cpu-32")
	if err != nil {
		t.Fatal(err)
	}
	withRAM := func(capacity int64) *hw.Snapshot {
		s := *base
		s.Domains = append([]hw.Domain(nil), base.Domains...)
		s.Domains[0].Capacity = capacity
		return &s
	}
	admits := func(capacity int64) int {
		s := withRAM(capacity)
		p, err := plan.Search(m, s, opts)
		if err != nil || p.Chosen == nil {
			return 0
		}
		cpu, gpus := plan.Devices(s)
		r, err := plan.Account(m, p.Chosen.Profile, cpu, gpus)
		if err != nil {
			t.Fatal(err)
		}
		var l admission.Ledger
		n := 0
		for range 3 {
			tk, err := l.Admit("m", r, s)
			var refused *admission.Refusal
			if errors.As(err, &refused) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			tk.Started()
			n++
		}
		return n
	}
	lo, hi := int64(1<<30), int64(32<<30)
	for hi-lo > 16<<20 {
		mid := (lo + hi) / 2
		if admits(mid) >= 2 {
			hi = mid
		} else {
			lo = mid
		}
	}
	if admits(hi) != 2 {
		t.Fatalf("no capacity admits exactly two loads (at %d MiB: %d)", hi>>20, admits(hi))
	}
	t.Logf("a machine of %d MiB holds two loads", hi>>20)
	return withRAM(hi)
}
