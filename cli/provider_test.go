package cli

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/engine/enginetest"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/synth"
)

// modelsDir names files as llama-server's router does: without .gguf, a
// split model by its first shard, projectors left out.
func TestModelsDir(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{
		"Qwen3-0.6B-Q4_K_M.gguf",
		"big-00001-of-00002.gguf", "big-00002-of-00002.gguf",
		"mmproj-Qwen3-F16.gguf",
		"notes.txt",
	} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.gguf"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := modelsDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := slices.Sorted(maps.Keys(got))
	if want := []string{"Qwen3-0.6B-Q4_K_M", "big-00001-of-00002"}; !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	if got["big-00001-of-00002"] != filepath.Join(dir, "big-00001-of-00002.gguf") {
		t.Errorf("path %q", got["big-00001-of-00002"])
	}
	if _, err := modelsDir(t.TempDir()); err == nil {
		t.Error("an empty directory was accepted")
	}
}

// TestProviderEvictsThroughLaunch runs the provider's loads through the
// launch chain and the shared ledger with the stand-in llama-server: a
// Llama 3.1 8B F16 with every layer on a 24 GiB card fits once, so a
// request for a second copy stops the first (by the ledger's refusal,
// not a count), and the first's booking is gone from the ledger.
func TestProviderEvictsThroughLaunch(t *testing.T) {
	t.Setenv("FAKE_LLAMA_MODE", "good")
	bin := enginetest.BuildFake(t)
	dir := t.TempDir()
	src := writeShape(t, t.TempDir(), "llama-3.1-8b", synth.F16)
	for _, n := range []string{"x", "y"} {
		if err := os.Link(src, filepath.Join(dir, n+".gguf")); err != nil {
			t.Fatal(err)
		}
	}
	snap, _ := hw.LoadMachine("rtx-4090")
	opts := plan.DefaultSearch()
	opts.Parallel, opts.Fixed.Ctx = 1, 8192
	all := 999
	opts.Fixed.GPULayers = &all
	f := startProviderOn(t, bin, "", snap, opts, dir, nil)
	for _, m := range []string{"x", "y"} {
		resp, err := liveChat(context.Background(), f.srv.URL, m, false, 1)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// The stand-in answers /completion only: what it says about
		// the chat is passed through, never a 503 of the provider's.
		if resp.StatusCode == 503 || resp.StatusCode == 502 {
			t.Fatalf("%s: %d\n%s", m, resp.StatusCode, f.log.String())
		}
	}
	if s := f.states(); s["x"] != "unloaded" || s["y"] != "loaded" {
		t.Errorf("%v: want x stopped for y", s)
	}
	held := f.held(t)
	if len(held) != 1 || held[0] != "y.gguf" {
		t.Errorf("ledger holds %v, want y alone", held)
	}
	if !strings.Contains(f.log.String(), "eviction x: stopped to make room for y (gpu0 short by") {
		t.Errorf("no eviction line:\n%s", f.log.String())
	}
	t.Log(f.log.String())
}

// probeLike is snap as a probe would see it with the ledger's started
// servers running: each domain's and device's free memory less what
// they book.
func probeLike(t testing.TB, snap *hw.Snapshot) func(*admission.Ledger) *hw.Snapshot {
	return func(l *admission.Ledger) *hw.Snapshot {
		held, err := l.Held()
		if err != nil {
			t.Error(err)
		}
		used := map[string]int64{}
		for _, b := range held {
			if b.Started {
				for d, n := range b.Need {
					used[d] += n
				}
			}
		}
		s := *snap
		s.Domains = slices.Clone(snap.Domains)
		s.Devices = slices.Clone(snap.Devices)
		for i := range s.Domains {
			f := s.Domains[i].Capacity - used[s.Domains[i].ID]
			s.Domains[i].Free = &f
		}
		for i := range s.Devices {
			if v := &s.Devices[i]; v.Type != hw.TypeCPU && v.Total > 0 {
				f := v.Total - used[v.Domain]
				v.Free = &f
			}
		}
		return &s
	}
}

// TestProviderPlansBesideIdle: on a machine probed with x's server
// running, a request for y, which fits only once x is stopped, gets y's
// whole plan (the context x got on the empty card), and x is evicted.
// Planned on the probe alone, y would not fit the 24 GiB card at all.
func TestProviderPlansBesideIdle(t *testing.T) {
	t.Setenv("FAKE_LLAMA_MODE", "good")
	bin := enginetest.BuildFake(t)
	dir := t.TempDir()
	src := writeShape(t, t.TempDir(), "llama-3.1-8b", synth.F16)
	for _, n := range []string{"x", "y"} {
		if err := os.Link(src, filepath.Join(dir, n+".gguf")); err != nil {
			t.Fatal(err)
		}
	}
	snap, _ := hw.LoadMachine("rtx-4090")
	opts := plan.DefaultSearch()
	opts.Parallel = 1
	all := 999
	opts.Fixed.GPULayers = &all
	f := startProviderWith(t, bin, "", probeLike(t, snap), opts, dir, nil)
	chat := func(m string) {
		t.Helper()
		resp, err := liveChat(context.Background(), f.srv.URL, m, false, 1)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 503 || resp.StatusCode == 502 {
			t.Fatalf("%s: %d\n%s", m, resp.StatusCode, f.log.String())
		}
	}
	flags := func(m string) string {
		for _, pm := range f.pool.Models() {
			if pm.Name == m && pm.Child != nil {
				return ctxFlag(pm.Child.Flags())
			}
		}
		return ""
	}
	chat("x")
	xCtx := flags("x")
	if xCtx == "" {
		t.Fatalf("x runs without -c: %v", f.states())
	}
	// What the probe leaves y with x running: its plan would not fit.
	sh, _ := synth.Lookup("llama-3.1-8b")
	m, err := synth.Model(sh, synth.F16)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := plan.Search(m, probeLike(t, snap)(f.ledger), opts); err != nil || p.Chosen != nil {
		t.Fatalf("on the probe alone y fits (%v): the test no longer needs the reclaim", err)
	}
	chat("y")
	if s := f.states(); s["x"] != "unloaded" || s["y"] != "loaded" {
		t.Fatalf("%v: want x stopped for y", s)
	}
	if yCtx := flags("y"); yCtx != xCtx {
		t.Errorf("y runs with -c %s, x had -c %s on the empty card: y's plan was shrunk", yCtx, xCtx)
	}
	if h := f.held(t); len(h) != 1 || h[0] != "y.gguf" {
		t.Errorf("ledger holds %v, want y alone", h)
	}
	if !strings.Contains(f.log.String(), "eviction x: stopped to make room for y (gpu0 short by") {
		t.Errorf("no eviction line:\n%s", f.log.String())
	}
}

func ctxFlag(flags []string) string {
	for i, f := range flags {
		if f == "-c" && i+1 < len(flags) {
			return flags[i+1]
		}
	}
	return ""
}
