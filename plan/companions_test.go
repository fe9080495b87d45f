package plan

import (
	"slices"
	"testing"

	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan/graph"
	"github.com/headroom-llm/headroom/synth"
)

func TestProjectorBuffers(t *testing.T) {
	proj, err := synth.ProjectorModel(synth.SigLIP896, gguf.TypeF16)
	if err != nil {
		t.Fatal(err)
	}
	// F16 weights get no CUDA row padding: each tensor rounded up to the
	// buffer's 128-byte alignment.
	var weights int64
	for _, tn := range proj.Tensors {
		weights += (int64(tn.Size) + 127) / 128 * 128
	}
	// 896/14 = 64 patches a side; the estimate is the FFN's activations
	// and three residual-wide tensors, plus the scores without flash
	// attention; the host holds the 896x896 RGB image in f32.
	const (
		patches = 64 * 64
		withFA  = patches*4304*4 + 3*patches*1152*4
		scores  = patches * patches * 16 * 4
		pixels  = 896 * 896 * 3 * 4
	)
	cpu := Device{Name: "CPU", Backend: "CPU"}
	cuda := []Device{{Name: "CUDA0", Backend: "CUDA", Free: 24 << 30}}
	type row struct {
		dev, buft, kind string
		bytes           int64
	}
	cases := []struct {
		name  string
		gpus  []Device
		onCPU bool
		flash bool
		want  []row
	}{
		{"on the GPU, flash attention", cuda, false, true, []row{
			{"CUDA0", "CUDA0", "model", weights}, {"CUDA0", "CUDA0", "compute", withFA}, {"CPU", "CPU", "compute", pixels}}},
		{"on the GPU, no flash attention", cuda, false, false, []row{
			{"CUDA0", "CUDA0", "model", weights}, {"CUDA0", "CUDA0", "compute", withFA + scores}, {"CPU", "CPU", "compute", pixels}}},
		// On the CPU, Gemma 3's encoder is replayed: 121.25 MiB with
		// flash attention, 1132.00 without, as llama-server logs them
		// (testdata/projector.json, TestProjectorReplayGolden).
		{"--no-mmproj-offload", cuda, true, true, []row{
			{"CPU", "CPU", "model", 0}, {"CPU", "CPU", "compute", 127139840}}},
		{"no GPU", nil, false, true, []row{
			{"CPU", "CPU", "model", 0}, {"CPU", "CPU", "compute", 127139840}}},
		{"no GPU, no flash attention", nil, false, false, []row{
			{"CPU", "CPU", "model", 0}, {"CPU", "CPU", "compute", 1186988032}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			comp := &Companions{Projector: proj, ProjectorName: "mmproj.gguf", ProjectorOnCPU: c.onCPU}
			fa := FlashOn
			if !c.flash {
				fa = FlashOff
			}
			got := comp.projectorBuffers(graph.Context{Flash: c.flash}, fa, builds.Default(), cpu, c.gpus)
			if len(got) != len(c.want) {
				t.Fatalf("%d buffers, want %d: %+v", len(got), len(c.want), got)
			}
			for i, w := range c.want {
				g := got[i]
				if w.kind == "model" && w.dev == "CPU" {
					// On the CPU the alignment is 32 bytes.
					w.bytes = 0
					for _, tn := range proj.Tensors {
						w.bytes += (int64(tn.Size) + 31) / 32 * 32
					}
				}
				if g.Device != w.dev || g.BufferType != w.buft || string(g.Kind) != w.kind || g.Bytes != w.bytes || g.Model != ModelProjector {
					t.Errorf("buffer %d: %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestDraftBuffers(t *testing.T) {
	main := model(t, "llama-3.1-8b", synth.Q4_K_M)
	draft := model(t, "llama-3.2-1b", synth.Q8_0)
	s, err := hw.LoadMachine("rtx-4090")
	if err != nil {
		t.Fatal(err)
	}
	cpu, gpus := Devices(s)
	p := Defaults()
	p.Ctx, p.Parallel = 16384, 2
	alone, err := Account(main, p, cpu, gpus)
	if err != nil {
		t.Fatal(err)
	}
	p.Companions = &Companions{Draft: draft, DraftName: "draft.gguf", DraftGPULayers: GPULayersAuto}
	with, err := Account(main, p, cpu, gpus)
	if err != nil {
		t.Fatal(err)
	}
	// llama-server gives the draft one context of the main context's
	// cells (16384 here) and sequences, with one output row each
	// (common_speculative_init_result; the -md goldens of
	// conformance/testdata/server measure it).
	dp := Defaults()
	dp.Ctx, dp.Parallel, dp.OutputsMax = 16384, 2, 2
	one, err := Account(draft, dp, cpu, gpus)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for _, b := range one.Buffers {
		want[b.Device+"/"+b.BufferType+"/"+string(b.Kind)] += b.Bytes
	}
	got := map[string]int64{}
	var mainBufs []Buffer
	for _, b := range with.Buffers {
		switch b.Model {
		case ModelDraft:
			got[b.Device+"/"+b.BufferType+"/"+string(b.Kind)] += b.Bytes
		case "":
			mainBufs = append(mainBufs, b)
		default:
			t.Errorf("buffer %+v of neither the main model nor the draft", b)
		}
	}
	if len(got) == 0 || !mapsEqual(got, want) {
		t.Errorf("draft buffers %v, want %v", got, want)
	}
	if !slices.Equal(mainBufs, alone.Buffers) {
		t.Error("the main model's buffers changed with a draft")
	}
	// The draft is auxiliary memory in the domain breakdown.
	a0, _ := alone.Against(s)
	a1, _ := with.Against(s)
	var extra int64
	for _, n := range got {
		extra += n
	}
	var aux0, aux1 int64
	for i := range a0.Domains {
		aux0 += a0.Domains[i].Auxiliary
		aux1 += a1.Domains[i].Auxiliary
	}
	if aux1-aux0 != extra {
		t.Errorf("auxiliary grew by %d, the draft holds %d", aux1-aux0, extra)
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A plan with a draft and a projector counts them in every candidate: it
// keeps less context than without them, what it chose fits with them, and
// its flags load them.
func TestSearchCountsCompanions(t *testing.T) {
	main := model(t, "llama-3.1-8b", synth.Q4_K_M)
	draft := model(t, "llama-3.2-1b", synth.Q8_0)
	proj, err := synth.ProjectorModel(synth.SigLIP896, gguf.TypeF16)
	if err != nil {
		t.Fatal(err)
	}
	s, err := hw.LoadMachine("rtx-5070")
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultSearch()
	bare, err := Search(main, s, o)
	if err != nil || bare.Chosen == nil {
		t.Fatalf("%v %v", err, bare)
	}
	o.Base.Companions = &Companions{Projector: proj, ProjectorName: "mmproj.gguf", Draft: draft, DraftName: "draft.gguf", DraftGPULayers: GPULayersAuto}
	p, err := Search(main, s, o)
	if err != nil || p.Chosen == nil {
		t.Fatalf("%v %v", err, p)
	}
	c := p.Chosen
	if c.GPULayers > bare.Chosen.GPULayers || c.GPULayers == bare.Chosen.GPULayers && c.CtxPerSlot >= bare.Chosen.CtxPerSlot {
		t.Errorf("with a draft and a projector: %d layers, %d per slot; without: %d, %d", c.GPULayers, c.CtxPerSlot, bare.Chosen.GPULayers, bare.Chosen.CtxPerSlot)
	}
	a, err := Assess(main, nil, c.Profile, s)
	if err != nil || a.Verdict != Fits || a.LeastMargin() < o.FitTarget {
		t.Errorf("chosen %v does not keep the target with its companions: %v", c.Flags, a.Reason)
	}
	owners := map[string]bool{}
	for _, b := range a.Buffers {
		owners[b.Model] = true
	}
	if !owners[ModelDraft] || !owners[ModelProjector] {
		t.Errorf("the chosen assessment has buffers of %v, want the draft's and the projector's", owners)
	}
	for _, cand := range p.Candidates {
		n := 0
		for _, b := range cand.Result.Buffers {
			if b.Model != "" {
				n++
			}
		}
		if n == 0 {
			t.Errorf("candidate %v counted no companion", cand.Flags)
		}
	}
	for _, f := range [][]string{{"--mmproj", "mmproj.gguf"}, {"-md", "draft.gguf"}} {
		i := slices.Index(c.Flags, f[0])
		if i < 0 || i+1 >= len(c.Flags) || c.Flags[i+1] != f[1] {
			t.Errorf("flags %v lack %v", c.Flags, f)
		}
	}
	found := false
	for _, line := range p.Explain {
		found = found || len(line) > 30 && line[:30] == "counted in every candidate: th"
	}
	if !found {
		t.Errorf("the explanation does not say what the companions take: %v", p.Explain)
	}
}
