package catalog

import (
	"slices"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

func machine_(t testing.TB, preset string) *hw.Snapshot {
	t.Helper()
	s, err := hw.LoadMachine(preset)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func emptyLock(t testing.TB) *LockFile {
	t.Helper()
	l, err := LoadLock()
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Packages) != 0 || len(l.Variants) != 0 {
		t.Fatalf("the committed lock must be empty until a lock run reaches the Hub")
	}
	return l
}

func TestRecommendOrder(t *testing.T) {
	cat, lock := mustLoad(t), emptyLock(t)
	for _, tc := range []struct {
		preset, goal string
	}{{"rtx-4090", GoalBalanced}, {"rtx-4090", GoalQuality}, {"cpu-32", GoalSpeed}, {"m4-max-64", GoalContext}, {"rtx-3060-12", GoalQuality}} {
		t.Run(tc.preset+"/"+tc.goal, func(t *testing.T) {
			o := DefaultOptions()
			o.Goal = tc.goal
			rows, err := Recommend(cat, lock, machine_(t, tc.preset), o)
			if err != nil {
				t.Fatal(err)
			}
			seenDisabled, fits, notFit := false, 0, 0
			for i, r := range rows {
				if r.Provenance != ProvenanceDerived || r.SizeSource != "derived" || r.Commit != "" {
					t.Errorf("%s %s: provenance %q, size %q, commit %q with an empty lock", r.Entry, r.Quant, r.Provenance, r.SizeSource, r.Commit)
				}
				if r.Enabled && r.Speed == nil {
					t.Errorf("%s %s: a fitting row has no speed estimate", r.Entry, r.Quant)
				}
				switch {
				case r.Enabled:
					fits++
					if seenDisabled {
						t.Errorf("row %d (%s %s) fits but ranks below a disabled one", i, r.Entry, r.Quant)
					}
					if r.Verdict != plan.Fits || r.Plan == nil || r.Rank != fits || r.Limiting != nil {
						t.Errorf("%s %s: enabled row %+v", r.Entry, r.Quant, r)
					}
				default:
					seenDisabled = true
					if r.Rank != 0 || r.Plan != nil {
						t.Errorf("%s %s: a disabled row has rank %d and plan %v", r.Entry, r.Quant, r.Rank, r.Plan)
					}
					if r.Verdict == plan.DoesNotFit {
						notFit++
						if r.Limiting == nil || r.Limiting.Domain == "" {
							t.Errorf("%s %s: no limiting domain", r.Entry, r.Quant)
						}
					}
				}
			}
			// The goal orders the fitting rows: by decode speed for speed,
			// usable speed first for balanced.
			for i := 1; i < len(rows) && rows[i].Enabled; i++ {
				da, ka := decode(&rows[i-1])
				db, kb := decode(&rows[i])
				switch tc.goal {
				case GoalSpeed:
					if kb && (!ka || db > da) {
						t.Errorf("speed goal: %s (%.1f tok/s) ranks above %s (%.1f)", rows[i-1].Entry, da, rows[i].Entry, db)
					}
				case GoalBalanced:
					if da < usableTPS && db >= usableTPS {
						t.Errorf("balanced goal: %s at %.1f tok/s ranks above %s at %.1f", rows[i-1].Entry, da, rows[i].Entry, db)
					}
				}
			}
			if fits == 0 || notFit == 0 {
				t.Errorf("%d fit and %d do not; a preset should show both", fits, notFit)
			}
			if rows[0].Plan.Source != "search" {
				t.Errorf("the top row's plan is %q, want search", rows[0].Plan.Source)
			}
		})
	}
}

func TestRecommendFilters(t *testing.T) {
	cat, lock := mustLoad(t), emptyLock(t)
	snap := machine_(t, "rtx-4090")
	for _, tc := range []struct {
		name string
		o    func(*Options)
		ok   func(Row) bool
	}{
		{"vision", func(o *Options) { o.Capabilities = []string{"vision"} }, func(r Row) bool { return slices.Contains(r.Capabilities, "vision") }},
		{"min-ctx", func(o *Options) { o.MinCtx = 32768 }, func(r Row) bool { return r.CtxTrained >= 32768 && (r.Plan == nil || r.Plan.CtxPerSlot >= 32768) }},
		{"license", func(o *Options) { o.Licenses = []string{"apache-2.0", "mit"} }, func(r Row) bool { return r.License == "apache-2.0" || r.License == "mit" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.o(&o)
			rows, err := Recommend(cat, lock, snap, o)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) == 0 {
				t.Fatal("the filter left nothing")
			}
			for _, r := range rows {
				if !tc.ok(r) {
					t.Errorf("%s %s passed the filter", r.Entry, r.Quant)
				}
			}
		})
	}
}

// BenchmarkRecommend ranks the whole catalog on an RTX 4090 preset as
// 'headroom recommend' does: plan.Search for every configuration. Derived
// headers are built once per catalog and are warm here, as they are for a
// server; the searches are not cached.
func BenchmarkRecommend(b *testing.B) { benchRecommend(b, "rtx-4090", nil) }

// BenchmarkRecommendMac is the same on a unified-memory Mac, whose plans
// replay the Metal backend's graph optimizer.
func BenchmarkRecommendMac(b *testing.B) { benchRecommend(b, "m4-max-128", nil) }

// BenchmarkRecommendCPU is the same on a CPU-only preset.
func BenchmarkRecommendCPU(b *testing.B) { benchRecommend(b, "cpu-32", nil) }

// BenchmarkRecommendCached is a second run on one machine: every outcome
// comes from the cache.
func BenchmarkRecommendCached(b *testing.B) { benchRecommend(b, "cpu-32", &MemoryCache{}) }

func benchRecommend(b *testing.B, preset string, c Cache) {
	cat, lock := mustLoad(b), emptyLock(b)
	snap := machine_(b, preset)
	o := DefaultOptions()
	if c != nil {
		o.Cache = c
	}
	if _, err := Recommend(cat, lock, snap, o); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Recommend(cat, lock, snap, o); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRecommendTopPicks pins the balanced goal's first choice on five kinds
// of machine, each for a reason a user would give.
func TestRecommendTopPicks(t *testing.T) {
	cat, lock := mustLoad(t), emptyLock(t)
	for _, tc := range []struct {
		preset, why string
		check       func(r *Row) bool
	}{
		// 12 GB: a 30B MoE with 3.3B active parameters decodes at a usable
		// speed with most of it in system memory; no dense model that size
		// would.
		{"rtx-3060-12", "30B-class MoE, partly offloaded", func(r *Row) bool {
			return r.Class == "moe" && r.ParamsB >= 30 && r.ParamsB < 35 && (!wholeOnGPU(r) || r.Plan.CPUMoE > 0)
		}},
		// 24 GB: gpt-oss-120b's 5.1B active parameters keep it usable with
		// most experts in DDR5.
		{"rtx-4090", "a 100B-class MoE", func(r *Row) bool {
			return r.Class == "moe" && r.ParamsB > 100 && r.ParamsB < 150
		}},
		// An 18 GB Mac gives Metal about 12 GiB: a model of 14-16B, wholly
		// on the GPU.
		{"m3-pro-18", "a 14-16B model, wholly on the GPU", func(r *Row) bool {
			return r.ParamsB >= 14 && r.ParamsB <= 16 && wholeOnGPU(r)
		}},
		// 128 GB unified: the 120B MoE fits the pool whole.
		{"m4-max-128", "the 100B-class MoE, wholly on the GPU", func(r *Row) bool {
			return r.Class == "moe" && r.ParamsB > 100 && wholeOnGPU(r)
		}},
		// A CPU-only laptop: only a small active parameter count decodes
		// at a usable speed from DDR5.
		{"cpu-32", "an MoE with few active parameters", func(r *Row) bool {
			return r.Class == "moe" && r.ActiveB != nil && *r.ActiveB < 5
		}},
	} {
		rows, err := Recommend(cat, lock, machine_(t, tc.preset), DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		top := &rows[0]
		d, known := decode(top)
		if !top.Enabled || !known || d < usableTPS || !tc.check(top) {
			t.Errorf("%s: top pick %s %s (%s %.1fB, %d/%d layers on the GPU, %.0f tok/s); want %s",
				tc.preset, top.Entry, top.Quant, top.Class, top.ParamsB, top.Plan.GPULayers, top.Plan.LayersTotal, d, tc.why)
		}
	}
}

// TestQualityGoal ranks the fitting configurations with a cited score
// first, best score first, and every cited score comes from one
// evaluation, so the scores compare.
func TestQualityGoal(t *testing.T) {
	cat, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	lock, _ := LoadLock()
	o := DefaultOptions()
	o.Goal = GoalQuality
	rows, err := Recommend(cat, lock, machine_(t, "m4-max-128"), o)
	if err != nil {
		t.Fatal(err)
	}
	benchmarks := map[string]bool{}
	seenNull := false
	last := 101.0
	for _, r := range rows {
		if !r.Enabled {
			break
		}
		if r.Quality == nil {
			seenNull = true
			continue
		}
		if seenNull {
			t.Fatalf("%s %s with score %.1f ranks after an entry without one", r.Entry, r.Quant, r.Quality.Score)
		}
		if r.Quality.Score > last {
			t.Errorf("%s %s: score %.1f after %.1f", r.Entry, r.Quant, r.Quality.Score, last)
		}
		last = r.Quality.Score
		benchmarks[strings.SplitN(r.Quality.Benchmark, ",", 2)[0]+" "+r.Quality.Source] = true
	}
	if len(benchmarks) != 1 {
		t.Errorf("scores from %d sources ranked together: %v", len(benchmarks), benchmarks)
	}
	if rows[0].Entry != "qwen3-32b" {
		t.Errorf("top by quality on a 128 GB Mac: %s %s, want qwen3-32b (85.7, the best cited score that fits)", rows[0].Entry, rows[0].Quant)
	}
}

// The catalog answers for the models people download in 2026: on a 24 GB
// card, a 64 GB Mac and a 32 GB CPU-only laptop, recommend lists Qwen3.6,
// Gemma 4, Nemotron Nano v2, LFM2 2.6B, Granite 4.0 and SmolLM3 configurations that
// fit (Qwen3.5 marked as superseded by 3.6), GLM-4.5-Air where 64 GB
// holds it, and the big MoEs (GLM-4.7, DeepSeek V3.1, Kimi K2) listed with
// what is short; each row with its Hub repository and the config it was
// derived from.
func TestRecommend2026(t *testing.T) {
	cat, lock := mustLoad(t), emptyLock(t)
	for _, preset := range []string{"rtx-4090", "m4-max-64", "cpu-32"} {
		rows, err := Recommend(cat, lock, machine_(t, preset), DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		fits, listed := map[string]bool{}, map[string]bool{}
		for i := range rows {
			r := &rows[i]
			e := cat.Entry(r.Entry)
			if !strings.HasPrefix(r.Ref, "hf:") || e == nil || e.Config == "" {
				t.Errorf("%s: %s %s has no Hub reference or config", preset, r.Entry, r.Quant)
			}
			listed[r.Entry] = true
			if r.Enabled {
				fits[r.Entry] = true
			}
			if strings.HasPrefix(r.Entry, "qwen3.5-") && r.Entry != "qwen3.5-0.8b" && !strings.HasPrefix(r.SupersededBy, "qwen3.6-") {
				t.Errorf("%s: %s is not marked superseded by its Qwen3.6 successor", preset, r.Entry)
			}
		}
		for _, want := range []string{"qwen3.6-35b-a3b", "qwen3.6-27b", "gemma-4-31b-it", "qwen3.5-0.8b",
			"nemotron-nano-9b-v2", "lfm2-2.6b", "granite-4.0-h-micro", "smollm3-3b"} {
			if !fits[want] {
				t.Errorf("%s: no configuration of %s fits", preset, want)
			}
		}
		// GLM-4.5-Air at Q4_K_M (67 GiB) runs with its experts in 64 GB
		// of system memory beside a 24 GB card; a 64 GB Mac and a 32 GB
		// laptop cannot hold it.
		if got, want := fits["glm-4.5-air"], preset == "rtx-4090"; got != want {
			t.Errorf("%s: glm-4.5-air fits = %v, want %v", preset, got, want)
		}
		for _, big := range []string{"glm-4.7", "deepseek-v3.1-terminus", "kimi-k2-instruct"} {
			if !listed[big] || fits[big] {
				t.Errorf("%s: %s listed = %v, fits = %v; want it listed as not fitting", preset, big, listed[big], fits[big])
			}
		}
	}
}
