package engine

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/engine/enginetest"
	"github.com/headroom-llm/headroom/plan"
)

// A profile's memory and placement flags reach llama-bench in its own
// spellings; what llama-server and llama-bench share is passed as is.
func TestBenchArgs(t *testing.T) {
	p := plan.Defaults()
	p.GPULayers, p.FlashAttn, p.CacheK, p.CacheV, p.CPUMoE = 20, plan.FlashOn, "q8_0", "q8_0", 3
	p.Mmap, p.NoKVOffload, p.TensorSplit = false, true, []float64{3, 1}
	ov, err := plan.ParseOverrides(`blk\.1\.ffn=CPU,exps=CPU`)
	if err != nil {
		t.Fatal(err)
	}
	p.Overrides = ov
	got := strings.Join(BenchArgs(p), " ")
	want := `-ngl 20 -fa on -ctk q8_0 -ctv q8_0 -b 2048 -ub 512 -ncmoe 3 -ot blk\.1\.ffn=CPU;exps=CPU -ts 3/1 -nkvo 1 -lm none`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if a := BenchArgs(plan.Defaults()); slices.Contains(a, "-ngl") || slices.Contains(a, "-lm") {
		t.Errorf("defaults (auto layers, mapped): %v", a)
	}
}

// llama-bench's own JSON (de3ff81, a Qwen3-0.6B twin, pp16 and tg4 twice)
// reads as two tests with their samples.
func TestParseBench(t *testing.T) {
	data, err := os.ReadFile("testdata/llama-bench-de3ff81.json")
	if err != nil {
		t.Fatal(err)
	}
	m, build, err := parseBench(data)
	if err != nil {
		t.Fatal(err)
	}
	pp, tg := m.Test("pp", 0), m.Test("tg", 0)
	if build != "de3ff81" || len(m.Tests) != 2 || pp == nil || tg == nil || pp.Tokens != 16 || tg.Tokens != 4 ||
		pp.Repetitions != 2 || tg.Repetitions != 2 || pp.MeanTPS <= 0 || tg.MeanTPS <= 0 {
		t.Errorf("build %q, tests %+v", build, m.Tests)
	}
	for _, bad := range []string{"", "{}", "[]", "[{\"avg_ts\": \"fast\"}]"} {
		if _, _, err := parseBench([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzParseBench(f *testing.F) {
	if data, err := os.ReadFile("testdata/llama-bench-de3ff81.json"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(`[{"n_prompt": 1, "samples_ts": [1, 2]}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, _, err := parseBench(data)
		if err == nil && len(m.Tests) == 0 {
			t.Error("no error and no tests")
		}
	})
}

// The budget decides the main run's size from the probe: at 100 prompt
// and 10 generated tokens a second, 60 s hold five repetitions of pp512
// and tg64 (5 x 11.52 s) but not of tg128 (5 x 17.92 s); the context fill
// is then said to be past the budget. 600 s hold llama-bench's defaults
// and the fill (1.5 x 4096 / 100 + 1.6 s).
func TestBenchBudget(t *testing.T) {
	bin, calls := enginetest.Bench(t, 100, 10)
	for _, tc := range []struct {
		budget time.Duration
		runs   []string
		deep   bool
	}{
		{60 * time.Second, []string{"-p 128 -n 16 -r 1", "-p 512 -n 64 -r 5"}, false},
		{600 * time.Second, []string{"-p 128 -n 16 -r 1", "-p 512 -n 128 -r 5", "-p 0 -n 16 -d 4096 -r 1"}, true},
		{2 * time.Second, []string{"-p 128 -n 16 -r 1"}, false},
	} {
		os.Remove(calls)
		var said []string
		m, err := Bench(context.Background(), BenchRequest{Bin: bin, Model: "twin.gguf", Args: []string{"-ngl", "0"}, Depth: 4096,
			Budget: tc.budget, Progress: func(s string) { said = append(said, s) }})
		if err != nil {
			t.Fatal(err)
		}
		log, _ := os.ReadFile(calls)
		lines := strings.Split(strings.TrimSpace(string(log)), "\n")
		if len(lines) != len(tc.runs) {
			t.Fatalf("%s: ran %q, want %q", tc.budget, lines, tc.runs)
		}
		for i, l := range lines {
			if !strings.HasPrefix(l, "-m twin.gguf -o json -ngl 0 ") || !strings.HasSuffix(l, tc.runs[i]) {
				t.Errorf("%s: run %d was %q, want ...%s", tc.budget, i, l, tc.runs[i])
			}
		}
		if (m.Test("tg", 4096) != nil) != tc.deep || m.Test("tg", 0) == nil || m.Test("pp", 0) == nil || len(said) != len(tc.runs) {
			t.Errorf("%s: tests %+v, said %q", tc.budget, m.Tests, said)
		}
		if !tc.deep && !strings.Contains(strings.Join(m.Notes, " "), "not measured") {
			t.Errorf("%s: the skipped full-context figure is not said: %q", tc.budget, m.Notes)
		}
		if m.Build != "abc1234" || m.Tool != bin {
			t.Errorf("build %q tool %q", m.Build, m.Tool)
		}
	}
}
