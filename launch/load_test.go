package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/conformance"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/engine/enginetest"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/source"
	"github.com/headroom-llm/headroom/synth"
)

// goldenLog writes the log llama.cpp printed for a recorded conformance
// case to a file the stand-in llama-server replays.
func goldenLog(t *testing.T, id string) string {
	t.Helper()
	// llama-server's own loads: what serve starts.
	cases, err := conformance.Load(filepath.Join("..", "conformance", "testdata", "server"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if c.ID == id {
			p := filepath.Join(t.TempDir(), "llama.log")
			if err := os.WriteFile(p, []byte(strings.Join(c.Log, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	t.Fatalf("no golden case %s", id)
	return ""
}

// cpuMamba is the fixture's small model pulled from the Hub and assessed
// on a CPU-only machine with the profile of a recorded llama.cpp load:
// 4096 cells, one sequence, batch 512, flash attention off.
func cpuMamba(t *testing.T) (*fixture, *Assessed, string) {
	t.Helper()
	f := newFixture(t, "cpu-32")
	f.deps.Cache = &admission.Cache{}
	m, err := f.deps.Resolve(context.Background(), "hf:"+smallRepo+"/"+smallFile)
	if err != nil {
		t.Fatal(err)
	}
	o := plan.DefaultSearch()
	o.Parallel, o.Fixed.Ctx = 1, 4096
	o.Base.FlashAttn = plan.FlashOff
	a, err := f.deps.Assess(context.Background(), m, o)
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.deps.Pull(context.Background(), m, nil, f.store, false)
	if err != nil {
		t.Fatal(err)
	}
	return f, a, p.Path
}

func TestLoadReadyAndReconciled(t *testing.T) {
	bin := enginetest.BuildFake(t)
	f, a, path := cpuMamba(t)
	argv := filepath.Join(t.TempDir(), "argv.json")
	var ledger admission.Ledger
	records := t.TempDir()
	run, err := f.deps.Load(context.Background(), a, path, LoadOptions{Bin: bin, Ledger: &ledger, ReadyTimeout: 20 * time.Second, Records: records,
		Env: []string{"FAKE_LLAMA_MODE=good", "FAKE_LLAMA_ARGV=" + argv, "FAKE_LLAMA_LOG=" + goldenLog(t, "mamba2-130m.Q8_0.cpu.c4096x1.nofa.b512")}})
	if err != nil {
		t.Fatalf("load: %v\nsaid:\n%s", err, f.said)
	}
	defer run.Stop(context.Background())
	if run.Server.State() != engine.StateReady {
		t.Errorf("state %s, want ready", run.Server.State())
	}
	var args []string
	data, err := os.ReadFile(argv)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &args); err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(args, " ")
	if !strings.Contains(joined, "-m "+path) || !strings.Contains(joined, strings.Join(a.Chosen().Flags, " ")) {
		t.Errorf("llama-server got %q; want -m %s and the plan's flags %q", joined, path, a.Chosen().Flags)
	}
	// The replayed log is what llama.cpp printed for this very profile:
	// every buffer must agree with the plan.
	rec := run.Reconciliation
	if !rec.OK() || len(rec.Rows) < 4 {
		t.Errorf("reconciliation with llama.cpp's recorded log: %s (%+v)", rec.Summary(), rec)
	}
	t.Log(rec.Summary())
	var saved Record
	if data, err := os.ReadFile(run.Recorded); err != nil || json.Unmarshal(data, &saved) != nil ||
		len(saved.Logged) != 4 || len(saved.Planned) == 0 || saved.Summary != rec.Summary() || filepath.Dir(run.Recorded) != records {
		t.Errorf("record %q: %v %+v", run.Recorded, err, saved)
	}
	if !run.Reused {
		t.Error("the load recomputed an accounting the preview had made with the same key")
	}
	if held, _ := ledger.Held(); len(held) != 1 {
		t.Errorf("ledger holds %d loads, want 1", len(held))
	}
	if err := run.Stop(context.Background()); err != nil {
		t.Error(err)
	}
	if held, _ := ledger.Held(); len(held) != 0 {
		t.Errorf("ledger holds %d loads after the stop, want 0", len(held))
	}
}

func TestLoadFailures(t *testing.T) {
	bin := enginetest.BuildFake(t)
	f, a, path := cpuMamba(t)
	for _, c := range []struct {
		mode string
		want engine.Reason
	}{
		{"init-oom", engine.ReasonOutOfMemory},
		// /health says 200 but every completion fails: never ready.
		{"broken-health", engine.ReasonOutOfMemory},
		{"never-ready", engine.ReasonNotReadyInTime},
	} {
		t.Run(c.mode, func(t *testing.T) {
			var ledger admission.Ledger
			run, err := f.deps.Load(context.Background(), a, path, LoadOptions{Bin: bin, Ledger: &ledger, ReadyTimeout: 3 * time.Second,
				Env: []string{"FAKE_LLAMA_MODE=" + c.mode}})
			var fail *engine.Failure
			if !errors.As(err, &fail) || fail.Reason != c.want || fail.State != engine.StateFailed {
				if run != nil {
					run.Stop(context.Background())
				}
				t.Fatalf("want a %s failure, got %v", c.want, err)
			}
			if held, _ := ledger.Held(); len(held) != 0 {
				t.Errorf("a failed load still holds memory in the ledger: %+v", held)
			}
			t.Log(err)
		})
	}
}

// sparse8B writes a Llama-3.1-8B F16 file (16 GB, sparse) and opens it.
func sparse8B(t *testing.T) *Model {
	t.Helper()
	s, _ := synth.Lookup("llama-3.1-8b")
	b, err := synth.Build(s, synth.F16)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "Llama-3.1-8B-F16.gguf")
	if err := b.WriteFile(p); err != nil {
		t.Fatal(err)
	}
	cat, _ := catalog.Load()
	d := &Deps{Client: source.NewClient(func(string) string { return "" }), Catalog: cat}
	m, err := d.Resolve(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLoadAdmissionUnderConcurrency(t *testing.T) {
	bin := enginetest.BuildFake(t)
	m := sparse8B(t)
	snap, _ := hw.LoadMachine("rtx-4090")
	d := &Deps{Machine: func(context.Context) (*hw.Snapshot, error) { return snap, nil }, Cache: &admission.Cache{}}
	o := plan.DefaultSearch()
	o.Parallel, o.Fixed.Ctx = 1, 8192
	all := 999
	o.Fixed.GPULayers = &all
	a, err := d.Assess(context.Background(), m, o)
	if err != nil {
		t.Fatal(err)
	}
	// 16 GiB of weights on a 24 GiB card: one fits, two do not.
	var (
		ledger  admission.Ledger
		wg      sync.WaitGroup
		mu      sync.Mutex
		runs    []*Running
		refused int
		other   []error
	)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run, err := d.Load(context.Background(), a, m.Header.Artifact.Files[0].Path,
				LoadOptions{Bin: bin, Ledger: &ledger, ReadyTimeout: 20 * time.Second, Env: []string{"FAKE_LLAMA_MODE=good", "FAKE_LLAMA_LOAD_MS=50"}})
			mu.Lock()
			defer mu.Unlock()
			var ref *admission.Refusal
			switch {
			case err == nil:
				runs = append(runs, run)
			case errors.As(err, &ref):
				refused++
			default:
				other = append(other, err)
			}
		}()
	}
	wg.Wait()
	for _, r := range runs {
		if err := r.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}
	if len(runs) != 1 || refused != 49 || len(other) != 0 {
		t.Fatalf("50 concurrent loads of a model that fits once: %d started, %d refused, other errors %v", len(runs), refused, other)
	}
	// Unloaded, it fits again.
	run, err := d.Load(context.Background(), a, m.Header.Artifact.Files[0].Path,
		LoadOptions{Bin: bin, Ledger: &ledger, ReadyTimeout: 20 * time.Second, Env: []string{"FAKE_LLAMA_MODE=good", "FAKE_LLAMA_LOAD_MS=50"}})
	if err != nil {
		t.Fatalf("a load after the first was stopped: %v", err)
	}
	run.Stop(context.Background())
	if !slices.Contains(run.Flags, "-ngl") {
		t.Errorf("flags %v carry no -ngl", run.Flags)
	}
}

// What a load allocated beyond its plan is kept under its key, and the
// next load of the same key is admitted with it added; a load that stays
// within the plan forgets it.
func TestLoadLearnsFromTheLastRun(t *testing.T) {
	bin := enginetest.BuildFake(t)
	f, a, path := cpuMamba(t)
	// llama.cpp's own log of this profile, with a KV buffer 24 MiB larger
	// than it printed: a build that allocates more than the plan.
	golden := goldenLog(t, "mamba2-130m.Q8_0.cpu.c4096x1.nofa.b512")
	data, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	bigger := false
	for i, l := range lines {
		if strings.Contains(l, "RS buffer size") && !bigger {
			j := strings.Index(l, "= ")
			var mib float64
			if _, err := fmt.Sscanf(strings.TrimSpace(l[j+2:]), "%f MiB", &mib); err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			lines[i] = l[:j+2] + fmt.Sprintf("%8.2f MiB", mib+24)
			bigger = true
		}
	}
	if !bigger {
		t.Fatal("no RS line in the golden log")
	}
	more := filepath.Join(t.TempDir(), "more.log")
	if err := os.WriteFile(more, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	obs := t.TempDir()
	load := func(log string) *Running {
		t.Helper()
		var ledger admission.Ledger
		run, err := f.deps.Load(context.Background(), a, path, LoadOptions{Bin: bin, Ledger: &ledger, ReadyTimeout: 20 * time.Second,
			Records: t.TempDir(), Observations: obs, Env: []string{"FAKE_LLAMA_MODE=good", "FAKE_LLAMA_LOG=" + log}})
		if err != nil {
			t.Fatalf("load: %v\nsaid:\n%s", err, f.said)
		}
		if err := run.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
		return run
	}
	first := load(more)
	if first.Observed != nil || first.Reconciliation.OK() {
		t.Fatalf("first load: observed %+v, reconciliation %s", first.Observed, first.Reconciliation.Summary())
	}
	second := load(more)
	if second.Observed == nil || len(second.Observed.Rows) != 1 || second.Observed.Rows[0].Kind != "rs" ||
		second.Observed.Rows[0].DiffBytes < 23<<20 || second.Observed.Record != first.Recorded {
		t.Fatalf("second load: observed %+v", second.Observed)
	}
	if !strings.Contains(f.said.String(), "admitting with what an earlier load of the same key allocated beyond the plan") {
		t.Errorf("the second load did not say it used the observation:\n%s", f.said)
	}
	// The same reconciliation: against the plan, not the plan plus what
	// was observed.
	if second.Reconciliation.Summary() != first.Reconciliation.Summary() {
		t.Errorf("reconciled %q, then %q", first.Reconciliation.Summary(), second.Reconciliation.Summary())
	}
	if third := load(golden); third.Observed == nil || !third.Reconciliation.OK() {
		t.Fatalf("third load (as planned): observed %v, %s", third.Observed, third.Reconciliation.Summary())
	}
	if fourth := load(golden); fourth.Observed != nil {
		t.Errorf("an observation outlived a load within the plan: %+v", fourth.Observed)
	}
}
