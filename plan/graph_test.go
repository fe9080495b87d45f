package plan

import (
	"github.com/headroom-llm/headroom/builds"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/ggml"
	"github.com/headroom-llm/headroom/synth"
)

func shapeModel(t *testing.T, s synth.Shape) *arch.Model {
	t.Helper()
	return shapeQuantModel(t, s, synth.Q8_0)
}

// The llama.cpp figures are the "CPU compute buffer size is N MiB" lines
// (four decimals) logged by node-llama-cpp 3.21.1's llama.cpp on the CPU
// backend for TinyLlama-shaped files and variants of them: one layer,
// n_embd 4096 with 64-wide heads, 16 heads of 128. The replay must agree to
// the printed precision.
func TestComputeReplayCPU(t *testing.T) {
	base, _ := synth.Lookup("tinyllama-1.1b")
	one := base
	one.Layers = 1
	wide := base
	wide.Embd, wide.HeadDim = 4096, 64
	h16 := base
	h16.Heads, h16.HeadDim = 16, 128
	tests := []struct {
		name    string
		s       synth.Shape
		ctx, ub int
		fa      FlashAttn
		mib     float64
	}{
		{"tinyllama", base, 4096, 512, FlashOff, 285.0098},
		{"tinyllama", base, 2048, 512, FlashOff, 153.0098},
		{"tinyllama", base, 8192, 512, FlashOff, 549.0098},
		{"tinyllama", base, 4096, 256, FlashOff, 142.5049},
		{"tinyllama", base, 4096, 512, FlashOn, 70.5020},
		{"tinyllama", base, 2048, 512, FlashOn, 70.5020},
		{"tinyllama", base, 8192, 512, FlashOn, 70.5020},
		{"tinyllama", base, 4096, 256, FlashOn, 35.2510},
		{"1 layer", one, 4096, 512, FlashOff, 285.0098},
		{"1 layer", one, 4096, 512, FlashOn, 70.5020},
		{"embd 4096", wide, 4096, 512, FlashOff, 305.0098},
		{"embd 4096", wide, 4096, 512, FlashOn, 106.5137},
		{"16 heads", h16, 4096, 512, FlashOff, 158.0098},
		{"16 heads", h16, 4096, 512, FlashOn, 70.5020},
	}
	models := map[string]*arch.Model{}
	for _, tc := range tests {
		m := models[tc.name]
		if m == nil {
			m = shapeModel(t, tc.s)
			models[tc.name] = m
		}
		p := Defaults()
		p.OutputsMax = libraryOutputs
		p.Ctx, p.FlashAttn, p.Batch = tc.ctx, tc.fa, tc.ub
		c, err := resolveContext(p, m.CtxTrain, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := float64(cpuComputeBytes(m, c, measuredRules(t, "80fb11a"), builderFor(m))) / (1 << 20)
		diff := got - tc.mib
		if diff > 0.00005 || diff < -0.00005 {
			t.Errorf("%s ctx %d ub %d fa %s: %.4f MiB, llama.cpp %.4f (diff %+.4f)", tc.name, tc.ctx, tc.ub, tc.fa, got, tc.mib, diff)
		}
		t.Logf("%-10s ctx %5d ub %3d fa %-3s: replay %9.4f MiB, llama.cpp %9.4f, diff %+.4f (%+.1f%%)", tc.name, tc.ctx, tc.ub, tc.fa, got, tc.mib, diff, 100*diff/tc.mib)
	}
}

// libraryOutputs makes a profile a library context's, as node-llama-cpp
// creates it (n_outputs_max = n_batch): the llama.cpp figures these tests
// hold the replay to were measured that way, with n_ubatch output rows.
const libraryOutputs = 1 << 20

// ruleGraphs is a shape's worst-case graph at ctx cells as a build
// with rules r records it, for the tests of older builds' rules; the
// model and context are returned beside it.
func ruleGraphs(t *testing.T, shape string, q synth.Quant, ctx int, fa FlashAttn) (*arch.Model, Context, func(r builds.Rules) *ggml.Graph) {
	t.Helper()
	s, _ := synth.Lookup(shape)
	m := shapeQuantModel(t, s, q)
	p := Defaults()
	p.Ctx, p.FlashAttn = ctx, fa
	c, err := resolveContext(p, m.CtxTrain, nil)
	if err != nil {
		t.Fatal(err)
	}
	build := builderFor(m)
	return m, c, func(r builds.Rules) *ggml.Graph { return build(m, c, c.NUBatch, &gb{cpu: "CPU", rules: r}) }
}

// Older builds' inputs (without Rules.MaskF16 and EmbdSelect): an F32 mask
// that the graph casts to F16 for flash attention, and no unused vector
// input beside the token lookup.
func TestOlderBuildInputs(t *testing.T) {
	_, _, graph := ruleGraphs(t, "llama-3.2-1b", synth.Q8_0, 4096, FlashOn)
	inputs := func(r builds.Rules) (names map[string]gguf.GGMLType, casts int) {
		g := graph(r)
		names = map[string]gguf.GGMLType{}
		for _, l := range g.Leafs() {
			names[l.Name] = l.Type()
		}
		for _, n := range g.Nodes() {
			if n.Op() == ggml.Cpy && n.Type() == gguf.TypeF16 {
				casts++
			}
		}
		return names, casts
	}
	now, casts := inputs(measuredRules(t, "80fb11a"))
	if now["kq_mask"] != gguf.TypeF16 || casts != 0 {
		t.Errorf("80fb11a: mask %v, %d casts; want an F16 input and none", now["kq_mask"], casts)
	}
	if _, ok := now["inp_embd"]; !ok {
		t.Error("80fb11a: no vector input")
	}
	old, casts := inputs(measuredRules(t, "80fb11a", func(r *builds.Rules) { r.MaskF16, r.EmbdSelect = false, false }))
	if old["kq_mask"] != gguf.TypeF32 || casts != 1 {
		t.Errorf("older build: mask %v, %d casts; want an F32 input cast once", old["kq_mask"], casts)
	}
	if _, ok := old["inp_embd"]; ok {
		t.Error("older build: the vector input is made")
	}
}

// Builds before set_rows (without Rules.KVSetRows) write K and V with ggml_cpy into
// views of the cache: no index inputs, one copy per cache per layer, and
// the CPU compute buffer smaller by what the indices took. Builds before
// PR #6122 (without Rules.OutIDs) compute the last layer for every token.
func TestOlderBuildKVWrite(t *testing.T) {
	m, c, graph := ruleGraphs(t, "llama-3.2-1b", synth.Q8_0, 4096, FlashOff)
	build := builderFor(m)
	count := func(r builds.Rules) (leafs map[string]int64, cpys, setRows, getRows int) {
		g := graph(r)
		leafs = map[string]int64{}
		for _, l := range g.Leafs() {
			leafs[l.Name] = ggml.Elems(l.Ne())
		}
		for _, n := range g.Nodes() {
			switch n.Op() {
			case ggml.Cpy:
				cpys++
			case ggml.SetRows:
				setRows++
			case ggml.GetRows:
				getRows++
			}
		}
		return leafs, cpys, setRows, getRows
	}
	kvCopy := measuredRules(t, "80fb11a", func(r *builds.Rules) { r.KVSetRows = false })
	noOutIDs := measuredRules(t, "80fb11a", func(r *builds.Rules) { r.OutIDs = false })
	now, cpys, setRows, getRowsNow := count(measuredRules(t, "80fb11a"))
	if cpys != 0 || setRows != 2*len(m.Layers) {
		t.Fatalf("set_rows graph: %d copies, %d set_rows; want 0 and %d", cpys, setRows, 2*len(m.Layers))
	}
	old, cpys, setRows, _ := count(kvCopy)
	if cpys != 2*len(m.Layers) || setRows != 0 {
		t.Errorf("ggml_cpy KV write: %d copies, %d set_rows; want %d and 0", cpys, setRows, 2*len(m.Layers))
	}
	for _, name := range []string{"k_idxs", "v_idxs"} {
		if _, ok := old[name]; ok {
			t.Errorf("ggml_cpy KV write: the graph still has %s", name)
		}
	}
	// A transposed V takes an I64 index per element: n_embd_v_gqa x
	// tokens.
	if want := int64(m.Layers[0].VDim) * int64(c.NUBatch); now["v_idxs"] != want {
		t.Fatalf("v_idxs has %d elements, want %d", now["v_idxs"], want)
	}
	idx := 8 * (now["k_idxs"] + now["v_idxs"])
	if got := cpuComputeBytes(m, c, measuredRules(t, "80fb11a"), build) - cpuComputeBytes(m, c, kvCopy, build); got != idx {
		t.Errorf("the ggml_cpy KV write saves %d bytes of CPU compute buffer, want the indices' %d", got, idx)
	}
	_, _, _, getRowsOld := count(noOutIDs)
	if now["inp_out_ids"] == 0 || getRowsNow-getRowsOld != 2 {
		t.Errorf("every row computed: %d get_rows, %d now; want the last layer's two fewer", getRowsOld, getRowsNow)
	}
	if old, _, _, _ := count(noOutIDs); old["inp_out_ids"] != 0 {
		t.Error("every row computed: the graph still has inp_out_ids")
	}
}

// Every architecture builds and is accounted under the older builds'
// graph rules, with flash attention on and off and layers on a GPU.
func TestOlderRulesEveryShape(t *testing.T) {
	old := measuredRules(t, "80fb11a", func(r *builds.Rules) {
		r.KVSetRows, r.OutIDs, r.QKVViews, r.MaskF16, r.EmbdSelect, r.OutputRows = false, false, false, false, false, 512
	})
	now := measuredRules(t, "80fb11a")
	cpu := Device{Name: "CPU", Backend: "CPU"}
	gpus := []Device{{Name: "CUDA0", Backend: "CUDA", Free: 80 << 30}}
	for _, name := range synth.Names() {
		s, _ := synth.Lookup(name)
		m := shapeQuantModel(t, s, synth.Q4_K_M)
		for _, fa := range []FlashAttn{FlashOff, FlashOn} {
			p := Defaults()
			p.Ctx, p.FlashAttn, p.GPULayers, p.Rules = 4096, fa, 99, &old
			q := p
			q.Rules = &now
			now, err := Account(m, q, cpu, gpus)
			if err != nil {
				t.Fatalf("%s fa %v: %v", name, fa, err)
			}
			then, err := Account(m, p, cpu, gpus)
			if err != nil {
				t.Fatalf("%s fa %v, older rules: %v", name, fa, err)
			}
			if len(then.Buffers) != len(now.Buffers) {
				t.Errorf("%s fa %v: %d buffers under the older rules, %d now", name, fa, len(then.Buffers), len(now.Buffers))
			}
		}
	}
}
