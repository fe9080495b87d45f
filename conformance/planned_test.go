package conformance_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/conformance"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/synth"
)

var updatePlanned = flag.Bool("update-planned", false, "rewrite conformance/harness/planned.json from headroom plan")

// plannedCase is a harness case (cases.mjs's fields) made from the flags
// headroom plan emits for the conformance machine.
type plannedCase struct {
	Shape          string `json:"shape"`
	Quant          string `json:"quant"`
	Backend        string `json:"backend"`
	GPULayers      int    `json:"gpuLayers"`
	ContextSize    int    `json:"contextSize"`
	Sequences      int    `json:"sequences"`
	FlashAttention bool   `json:"flashAttention"`
	BatchSize      int    `json:"batchSize"`
	CacheK         string `json:"cacheK"`
	CacheV         string `json:"cacheV"`
	MMap           bool   `json:"mmap"`
	SWAFull        bool   `json:"swaFull"`
	// Flags are the llama-server flags the case stands for.
	Flags []string `json:"flags"`
}

var plannedModels = []struct {
	shape    string
	q        synth.Quant
	parallel int
}{
	{"tinyllama-1.1b", synth.Q4_K_M, 1}, {"tinyllama-1.1b", synth.Q4_K_M, 4},
	{"llama-3.2-1b", synth.Q8_0, 1}, {"qwen3-0.6b", synth.Q8_0, 2},
	{"qwen2.5-0.5b", synth.Q8_0, 1}, {"llama-3.1-8b", synth.Q4_K_M, 1},
	// Sliding-window, hybrid recurrent, and shared-KV layers.
	{"gemma-3-1b", synth.Q8_0, 2}, {"lfm2-1.2b", synth.Q4_K_M, 1}, {"gemma-3n-e2b", synth.Q8_0, 1},
}

// planCases plans each model on the conformance machine (llvmpipe) as
// llama-server runs it: its default batches (-b 2048, -ub 512), no unified
// cache, flash attention on.
// The second result gives each plan's predicted use of llvmpipe's memory
// at a micro-batch: the plan's own (512), or another the engine ran it
// with.
func planCases(t *testing.T) ([]plannedCase, func(i, ubatch int) int64) {
	snap, err := hw.LoadMachine(filepath.Join("testdata", "llvmpipe-machine.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []plannedCase
	var device []int64
	var models []*arch.Model
	var profiles []plan.Profile
	onDevice := func(domains []hw.DomainUse) int64 {
		for _, d := range domains {
			if d.ID == "llvmpipe" {
				return d.Required
			}
		}
		return -1
	}
	for _, pm := range plannedModels {
		s, ok := synth.Lookup(pm.shape)
		if !ok {
			t.Fatalf("no synth shape %s", pm.shape)
		}
		m, err := synth.Model(s, pm.q)
		if err != nil {
			t.Fatal(err)
		}
		o := plan.DefaultSearch()
		o.Parallel = pm.parallel
		o.Base.FlashAttn = plan.FlashOn
		p, err := plan.Search(m, snap, o)
		if err != nil || p.Chosen == nil {
			t.Fatalf("%s: no plan: %v %v", pm.shape, err, p)
		}
		c := p.Chosen
		out = append(out, plannedCase{Shape: pm.shape, Quant: string(pm.q), Backend: "vulkan", GPULayers: c.GPULayers,
			ContextSize: c.CtxPerSlot, Sequences: c.Profile.Parallel, FlashAttention: true, BatchSize: 512,
			CacheK: c.Profile.CacheK, CacheV: c.Profile.CacheV, MMap: true, Flags: c.Flags})
		device = append(device, onDevice(c.Result.Domains))
		models, profiles = append(models, m), append(profiles, c.Profile)
	}
	predict := func(i, ubatch int) int64 {
		if ubatch == 512 {
			return device[i]
		}
		p := profiles[i]
		p.Batch, p.UBatch = ubatch, ubatch
		a, err := plan.Assess(models[i], nil, p, snap)
		if err != nil {
			t.Fatal(err)
		}
		return onDevice(a.Domains)
	}
	return out, predict
}

// TestPlannedCases checks that the harness's planned cases are what
// headroom plan emits today, and that each was loaded by llama-server with
// exactly those flags: its golden file exists, so the load succeeded and
// answered a completion, and TestAccuracy holds its buffers to the
// accounting bounds.
func TestPlannedCases(t *testing.T) {
	got, predict := planCases(t)
	path := filepath.Join("harness", "planned.json")
	if *updatePlanned {
		data, _ := json.MarshalIndent(got, "", "  ")
		if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want []plannedCase
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("headroom plan now emits other flags than %s records: rerun with -update-planned, then conformance/regen.sh --missing\n got %+v\nwant %+v", path, got, want)
	}
	cases, err := conformance.Load(filepath.Join("testdata", "server"))
	if err != nil {
		t.Fatal(err)
	}
	measured := map[string]*conformance.Case{}
	for i := range cases {
		measured[cases[i].ID] = &cases[i]
	}
	for i, pc := range got {
		id := plannedID(pc)
		c := measured[id]
		if c == nil {
			t.Errorf("planned case %s (%v) has no golden file: run conformance/regen.sh --missing", id, pc.Flags)
			continue
		}
		// The serving flags (-cram, -ctxcp, -cms) change nothing the
		// load allocates; the loads were measured without them.
		if !reflect.DeepEqual(c.Inputs.Command, loadFlags(pc.Flags)) {
			t.Errorf("%s: llama-server ran with %q, the plan emits %q", id, c.Inputs.Command, pc.Flags)
		}
		// What the engine put on the device, against what the plan
		// charged there: every buffer, compute included, within the
		// rounding of the figures llama.cpp printed.
		var lo, hi int64
		for _, b := range c.Figures.Buffers {
			if b.DeviceOrBufferType == "Vulkan0" {
				l, h := b.Bounds()
				lo, hi = lo+l, hi+h
			}
		}
		if hi > llvmpipeBytes {
			t.Errorf("%s: the engine used %d bytes of llvmpipe's %d: the plan does not fit", id, hi, int64(llvmpipeBytes))
		}
		ub := c.Figures.Context.NUbatch
		p := predict(i, ub)
		if ub != pc.BatchSize {
			t.Logf("%s: the engine ran it with a micro-batch of %d, not the plan's %d; predicted at %d", id, ub, pc.BatchSize, ub)
		}
		if p < lo || p > hi {
			t.Errorf("%s: plan charged llvmpipe %d bytes, the engine used %d..%d", id, p, lo, hi)
		}
		t.Logf("%s: plan charged llvmpipe %.2f MiB, engine used %.2f MiB (%+.2f%%)", id,
			float64(p)/(1<<20), float64(hi)/(1<<20), 100*float64(p-hi)/float64(hi))
	}
}

// plannedID is cases.mjs's caseId for a planned case.
func plannedID(c plannedCase) string {
	dev := fmt.Sprintf("vk%d", c.GPULayers)
	if c.GPULayers >= 999 {
		dev = "vkall"
	}
	id := fmt.Sprintf("%s.%s.%s.c%dx%d.fa.b%d", c.Shape, c.Quant, dev, c.ContextSize, c.Sequences, c.BatchSize)
	if c.CacheK != "f16" || c.CacheV != "f16" {
		id += ".k" + c.CacheK + "v" + c.CacheV
	}
	return id
}

// loadFlags is a command line without the flags for what llama-server
// keeps past the load, which change none of the buffers a load golden
// records.
func loadFlags(flags []string) []string {
	var out []string
	for i := 0; i < len(flags); i++ {
		switch flags[i] {
		case "-cram", "-ctxcp", "-cms":
			i++
			continue
		case "--no-cache-idle-slots":
			continue
		}
		out = append(out, flags[i])
	}
	return out
}
