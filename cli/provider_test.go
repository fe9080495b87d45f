package cli

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
