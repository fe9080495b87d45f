package plan

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/plan/ggml"
	"github.com/headroom-llm/headroom/synth"
)

// metalEmuCase is one load measured by conformance/metalemu/measure.sh:
// a CPU llama-server, stock and with the Metal backend's graph optimizer
// run on its CPU backend's splits.
type metalEmuCase struct {
	ID    string `json:"id"`
	Model string `json:"model"`
	Flags string `json:"flags"`
	// The compute buffer as printed: to four decimals as the context is
	// freed, or two where the server stopped before that.
	StockMiB string `json:"stock_mib"`
	MetalMiB string `json:"metal_mib"`
	Nodes    int    `json:"nodes"`
}

// metalEmuProfile reads the llama-server flags measure.sh passes.
func metalEmuProfile(flags string, rules Rules) (Profile, error) {
	p := Defaults()
	p.Rules = rules
	f := strings.Fields(flags)
	for i := 0; i+1 < len(f); i += 2 {
		switch f[i] {
		case "-c":
			n, err := strconv.Atoi(f[i+1])
			if err != nil {
				return p, err
			}
			p.Ctx = n
		case "-np":
			n, err := strconv.Atoi(f[i+1])
			if err != nil {
				return p, err
			}
			p.Parallel = n
		case "-fa":
			p.FlashAttn = FlashAttn(f[i+1])
		default:
			return p, fmt.Errorf("flag %q not read here", f[i])
		}
	}
	return p, nil
}

// The Metal backend's graph optimizer, as llama.cpp itself runs it:
// conformance/metalemu links a CPU llama-server whose CPU backend calls
// the Metal backend's ggml_graph_optimize (and, from de3ff81, its fusion
// table's allocation dependencies) on its splits, so the compute buffer it
// prints is the one the Metal reorder leads to on a one-device graph, no
// Metal device needed. headroom's replay with the Metal optimizer on that
// split must give the same bytes, and without it the stock figure.
func TestMetalOptimizerOnCPU(t *testing.T) {
	builds := []struct {
		name  string
		rules Rules
	}{
		{"80fb11a", Rules{}},
		// de3ff81's rules that bear on a CPU graph (engine.KnownEngines)
		{"de3ff81", Rules{NextNWithoutKV: true, SplitInputsGrow: true, GDNNormAsRMS: true, MetalFusion: true}},
	}
	for _, b := range builds {
		raw, err := os.ReadFile("testdata/metalemu/" + b.name + ".json")
		if err != nil {
			t.Fatal(err)
		}
		var cases []metalEmuCase
		if err := json.Unmarshal(raw, &cases); err != nil {
			t.Fatal(err)
		}
		if len(cases) < 20 {
			t.Errorf("%s: %d cases measured, want the whole list of measure.sh", b.name, len(cases))
		}
		for _, tc := range cases {
			name, quant, _ := strings.Cut(tc.Model, ":")
			s, ok := synth.Lookup(name)
			if !ok {
				t.Fatalf("%s: no shape %s", tc.ID, name)
			}
			q, err := synth.ParseQuant(quant)
			if err != nil {
				t.Fatal(err)
			}
			m := shapeQuantModel(t, s, q)
			p, err := metalEmuProfile(tc.Flags, b.rules)
			if err != nil {
				t.Fatalf("%s: %v", tc.ID, err)
			}
			c, err := resolveContext(p, m.CtxTrain, nil)
			if err != nil {
				t.Fatal(err)
			}
			build := builderFor(m)
			if build == nil {
				t.Fatalf("%s: no graph", tc.ID)
			}
			stock := cpuComputeBytes(m, c, b.rules, build)
			o := ggml.Sched{CPU: "CPU", Mem: &ggml.Arena{}, MetalFusion: b.rules.MetalFusion,
				Optimize: map[string]ggml.Optimizer{"CPU": ggml.OptMetal},
				Buffers:  map[string]ggml.BufferType{"CPU": {Align: cpuAlign}}}
			g := build(m, c, c.NUBatch, &gb{cpu: "CPU", rules: b.rules})
			if n := len(g.Nodes()); n != tc.Nodes {
				t.Errorf("%s %s: %d graph nodes, llama.cpp %d", b.name, tc.ID, n, tc.Nodes)
			}
			metal := o.Measure(g)["CPU"]
			// as llama.cpp prints it, to as many decimals
			mib := func(n int64, like string) string {
				_, frac, _ := strings.Cut(like, ".")
				return strconv.FormatFloat(float64(n)/(1<<20), 'f', len(frac), 64)
			}
			if got := mib(stock, tc.StockMiB); got != tc.StockMiB {
				t.Errorf("%s %s: stock %s MiB, llama.cpp %s", b.name, tc.ID, got, tc.StockMiB)
			}
			if got := mib(metal, tc.MetalMiB); got != tc.MetalMiB {
				t.Errorf("%s %s: Metal optimizer %s MiB, llama.cpp %s (stock %s)", b.name, tc.ID, got, tc.MetalMiB, mib(stock, tc.StockMiB))
			}
		}
	}
}
