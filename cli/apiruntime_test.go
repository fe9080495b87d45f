package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
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
	srv := startAPI(t, st, snap, bin, "", opts, 20*time.Second)
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

// serve and the API's /api/load run one chain (launch.Deps.Launch): each
// asks llama.cpp's own projection (llama-fit-params beside llama-server)
// before anything moves, and refuses, in the same words, a plan that fits
// by headroom's accounting but not by the projection. The stand-in
// projects 2000 MiB of weights for a 130M model, on a machine of 2 GiB.
// Without llama-fit-params the API starts the same load, so the refusal
// is the engine check's.
func TestEngineCheckRefusesServeAndAPI(t *testing.T) {
	t.Setenv("FAKE_LLAMA_MODE", "good")
	fake := enginetest.BuildFake(t)
	fitParams, calls := enginetest.FitParams(t, "")
	llamaServer := filepath.Join(filepath.Dir(fitParams), "llama-server")
	if err := os.Symlink(fake, llamaServer); err != nil {
		t.Fatal(err)
	}
	cpu32, err := hw.LoadMachine("cpu-32")
	if err != nil {
		t.Fatal(err)
	}
	snap := *cpu32
	snap.Domains = slices.Clone(cpu32.Domains)
	for i := range snap.Domains {
		snap.Domains[i].Capacity, snap.Domains[i].Usable = 2<<30, 0
	}
	machine := filepath.Join(t.TempDir(), "machine.json")
	data, err := json.Marshal(&snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(machine, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// Each load has a store of its own: a load keeps what it allocated
	// beyond its plan there, and the next one is admitted with it.
	stored := func() (*store.Store, string) {
		st, err := store.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return st, storedShape(t, st, "mamba2-130m", synth.Q8_0)
	}
	opts := plan.DefaultSearch()
	opts.Parallel, opts.Fixed.Ctx = 1, 4096
	why := "llama.cpp's own projection (" + fitParams + ") counts more than headroom's plan"
	checks := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "\n")
	}

	for _, tc := range []struct {
		name      string
		fitParams bool
		load      func(fitParams string) (refused bool, says string)
	}{
		{"serve", true, func(string) (bool, string) {
			// A serve that is not refused serves until cancelled.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, model := stored()
			out, errs, wait := newSession(t, nil).start(ctx, "serve", "--llama-server", llamaServer, "--machine", machine, "--port", "0",
				"-c", "4096", "--parallel", "1", model)
			code := wait()
			return code == 1 && !strings.Contains(out.String(), "ready:") && strings.Contains(errs.String(), "failed      does not fit"), errs.String()
		}},
		{"api", true, nil},
		{"api without llama-fit-params", false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			load := tc.load
			if load == nil {
				load = func(fp string) (bool, string) {
					st, model := stored()
					srv := startAPI(t, st, &snap, fake, fp, opts, 20*time.Second)
					code, body := postJSON(srv.URL+"/api/load", `{"model":`+quote(model)+`,"ctx":4096,"parallel":1}`)
					if code != 409 && code != 200 {
						t.Errorf("load answered %d: %s", code, body)
					}
					return code == 409, body
				}
			}
			fp := ""
			if tc.fitParams {
				fp = fitParams
			}
			before := checks()
			refused, says := load(fp)
			asked := checks() > before
			if asked != tc.fitParams || refused != tc.fitParams {
				t.Errorf("llama-fit-params asked %v, load refused %v; want both %v:\n%s", asked, refused, tc.fitParams, says)
			}
			if tc.fitParams && !strings.Contains(says, why) {
				t.Errorf("the refusal does not say why (%q):\n%s", why, says)
			}
		})
	}
}
