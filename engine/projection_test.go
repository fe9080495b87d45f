package engine

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/engine/enginetest"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

func TestProjectedResult(t *testing.T) {
	cpu := plan.Device{Name: "CPU"}
	gpus := []plan.Device{{Name: "Vulkan0"}}
	b := arch.Basics{Arch: "ernie4_5", NLayer: 16, NVocab: 128256, CtxTrain: 131072}
	p := plan.Defaults()
	p.Ctx, p.Parallel = 8192, 2
	rows := []BreakdownRow{
		{Name: "Vulkan0", Device: true, Model: 1200, Context: 256, Compute: 300},
		{Name: "Host", Model: 250, Context: 0, Compute: 20},
		{Name: "CPU_REPACK", Model: 40},
	}
	r, err := ProjectedResult(rows, p, b, cpu, gpus)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		dev, buft string
		kind      plan.BufferKind
	}
	got := map[key]int64{}
	for _, buf := range r.Buffers {
		got[key{buf.Device, buf.BufferType, buf.Kind}] += buf.Bytes
	}
	want := map[key]int64{
		{"Vulkan0", "Vulkan0", plan.KindModel}:   1201 << 20,
		{"Vulkan0", "Vulkan0", plan.KindKV}:      257 << 20,
		{"Vulkan0", "Vulkan0", plan.KindCompute}: 301 << 20,
		{"CPU", "Host", plan.KindModel}:          251 << 20,
		{"CPU", "Host", plan.KindCompute}:        21 << 20,
		{"CPU", "CPU_REPACK", plan.KindModel}:    41 << 20,
		// Two slots, one logits row each, of 128256 floats.
		{"CPU", "CPU", plan.KindOutput}: 2 * 128256 * 4,
	}
	if len(got) != len(want) {
		t.Errorf("buffers %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%v: %d bytes, want %d", k, got[k], v)
		}
	}
	if c := r.Context; c.NCtx != 8192 || c.NCtxSeq != 4096 || c.NSeq != 2 {
		t.Errorf("context %+v, want 8192 cells, 4096 per sequence, 2 sequences", c)
	}

	// A device the planned machine lacks cannot be charged anywhere.
	if _, err := ProjectedResult(rows, p, b, cpu, nil); err == nil || !strings.Contains(err.Error(), "Vulkan0") {
		t.Errorf("a projection onto a device the machine lacks: %v", err)
	}
	// An idle device row is no buffer, wherever it is.
	idle := []BreakdownRow{{Name: "CUDA0", Device: true}, {Name: "Host", Model: 10, Compute: 5}}
	if r, err := ProjectedResult(idle, p, b, cpu, nil); err != nil || len(r.Buffers) != 3 {
		t.Errorf("idle device row: %v, %d buffers, want 3", err, len(r.Buffers))
	}
}

func TestProjectedContext(t *testing.T) {
	lines := []string{
		"llama_context: constructing llama_context",
		"llama_context: n_seq_max     = 4",
		"llama_context: n_ctx         = 16384",
		"llama_context: n_ctx_seq     = 16384",
		"llama_context: n_batch       = 2048",
		"llama_context: n_ubatch      = 512",
		"llama_context: causal_attn   = 1",
		"llama_context: flash_attn    = auto",
		"llama_context: kv_unified    = true",
		"resolve_fused_ops: Flash Attention enabled",
	}
	p := plan.Defaults()
	c, ok := projectedContext(lines, p, arch.Basics{CtxTrain: 32768})
	if !ok {
		t.Fatal("no context read")
	}
	if c.NSeq != 4 || c.NCtx != 16384 || c.NCtxSeq != 16384 || c.NBatch != 2048 || c.NUBatch != 512 || !c.Flash || !c.Unified || c.NStream != 1 || c.VTrans {
		t.Errorf("context %+v", c)
	}
	if _, ok := projectedContext([]string{"nothing here"}, p, arch.Basics{}); ok {
		t.Error("a log without llama_context's lines read as a context")
	}
}

func TestSearchProjected(t *testing.T) {
	bin, calls := enginetest.FitParams(t, "")
	s, err := hw.LoadMachine("cpu-32")
	if err != nil {
		t.Fatal(err)
	}
	b := arch.Basics{Arch: "ernie4_5", NLayer: 20, NVocab: 32000, CtxTrain: 1 << 20}
	pr := Projector{Bin: bin, Model: "/nonexistent.gguf", Basics: b}
	o := plan.DefaultSearch()
	o.AllowQ8 = false
	p, err := SearchProjected(context.Background(), pr, s, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Chosen == nil {
		t.Fatalf("nothing chosen: %v", p.Explain)
	}
	c := p.Chosen
	cpu, gpus := plan.Devices(s)
	fits := func(perSlot int) bool {
		q := c.Profile
		q.Ctx = perSlot * o.Parallel
		r, err := pr.Account(context.Background(), q, cpu, gpus)
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.Against(s)
		if err != nil {
			t.Fatal(err)
		}
		return a.Verdict == plan.Fits && a.LeastMargin() >= o.FitTarget
	}
	if !fits(c.CtxPerSlot) || fits(c.CtxPerSlot+256) {
		t.Errorf("chose %d cells a slot: it must fit with the target left and %d must not", c.CtxPerSlot, c.CtxPerSlot+256)
	}
	if c.CtxPerSlot%256 != 0 || c.GPULayers != 0 {
		t.Errorf("chose %d cells a slot and %d GPU layers, want a multiple of 256 and none", c.CtxPerSlot, c.GPULayers)
	}
	data, _ := os.ReadFile(calls)
	n := strings.Count(string(data), "\n") - 2 // the two checks above
	if n > 12 {
		t.Errorf("the search projected %d times; the regula falsi on a linear margin should settle in a dozen", n)
	}
	if !strings.Contains(strings.Join(p.Explain, "\n"), "not one headroom models") {
		t.Errorf("the plan does not say its figures are llama.cpp's projection: %v", p.Explain)
	}
	for _, buf := range c.Result.Buffers {
		if buf.Note == "" {
			t.Errorf("buffer %+v has no note saying where its figure comes from", buf)
		}
	}

	// A context llama.cpp says fits at the trained length is taken whole.
	small := pr
	small.Basics.CtxTrain = 8192
	p, err = SearchProjected(context.Background(), small, s, o, nil)
	if err != nil || p.Chosen == nil || p.Chosen.CtxPerSlot != 8192 {
		t.Errorf("trained context 8192 on 32 GB: %+v, %v", p, err)
	}
}

// On a GPU machine the most layers that fit at the least context go to
// the GPU, by bisection over projections.
func TestSearchProjectedLayers(t *testing.T) {
	s, err := hw.LoadMachine("rtx-4090")
	if err != nil {
		t.Fatal(err)
	}
	_, gpus := plan.Devices(s)
	if len(gpus) == 0 {
		t.Fatal("rtx-4090 preset has no GPU")
	}
	bin, _ := enginetest.FitParams(t, gpus[0].Name)
	// 20 layers of 100 MiB with 2000 MiB in all fit a 24 GB card whole.
	b := arch.Basics{Arch: "ernie4_5", NLayer: 19, NVocab: 32000, CtxTrain: 4096}
	pr := Projector{Bin: bin, Model: "/nonexistent.gguf", Basics: b}
	p, err := SearchProjected(context.Background(), pr, s, plan.DefaultSearch(), nil)
	if err != nil || p.Chosen == nil {
		t.Fatalf("%+v, %v", p, err)
	}
	if p.Chosen.GPULayers != 20 {
		t.Errorf("%d GPU layers, want all 20", p.Chosen.GPULayers)
	}
	// A build that sees no GPU plans in system memory and says why.
	cpuOnly, _ := enginetest.FitParams(t, "")
	pr.Bin = cpuOnly
	p, err = SearchProjected(context.Background(), pr, s, plan.DefaultSearch(), nil)
	if err != nil || p.Chosen == nil {
		t.Fatalf("%+v, %v", p, err)
	}
	if p.Chosen.GPULayers != 0 || !strings.Contains(strings.Join(p.Explain, "\n"), "sees none of this machine's GPUs") {
		t.Errorf("a CPU build on a GPU machine: %d layers, %v", p.Chosen.GPULayers, p.Explain)
	}
}
