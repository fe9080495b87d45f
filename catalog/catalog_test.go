package catalog

import (
	"math"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/synth"
)

func mustLoad(t testing.TB) *Catalog {
	t.Helper()
	c, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCatalogCoverage(t *testing.T) {
	c := mustLoad(t)
	if len(c.Entries) < 30 {
		t.Errorf("%d entries, want at least 30", len(c.Entries))
	}
	kinds := map[string]int{}
	var minP, maxP = math.Inf(1), 0.0
	for _, e := range c.Entries {
		kinds[e.Class.Kind]++
		minP, maxP = min(minP, e.Class.ParamsB), max(maxP, e.Class.ParamsB)
	}
	for _, k := range []string{ClassDense, ClassMoE, ClassHybrid, ClassSSM} {
		if kinds[k] == 0 {
			t.Errorf("no %s entry", k)
		}
	}
	if minP > 1.3 || maxP < 200 {
		t.Errorf("sizes span %.1fB to %.1fB, want 1B-class to 235B-class", minP, maxP)
	}
}

func TestValidateRejects(t *testing.T) {
	good := `{"licenses": {"mit": "MIT"}, "entries": [{"id": "m", "name": "M", "family": "f", "class": {"kind": "dense", "params_b": 0.6},
		"config": "c", "shape": {"base": "qwen3-0.6b"}, "ctx_trained": 40960, "capabilities": [], "license": "mit", "quality": null,
		"variants": [{"quant": "Q4_K_M", "ref": "hf:o/r:Q4_K_M"}]}]}`
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatalf("the minimal catalog is rejected: %v", err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"duplicate id", `"entries": [`, `"entries": [{"id": "m", "name": "M", "family": "f", "class": {"kind": "dense", "params_b": 1}, "config": "c", "shape": {"base": "qwen3-0.6b"}, "ctx_trained": 40960, "capabilities": [], "license": "mit", "quality": null, "variants": [{"quant": "Q8_0", "ref": "hf:o/r:Q8_0"}]},`, "duplicate id"},
		{"unknown quant", `"quant": "Q4_K_M"`, `"quant": "IQ4_XS"`, "not a recipe"},
		{"unknown license", `"license": "mit"`, `"license": "wtfpl"`, "license"},
		{"score without provenance", `"quality": null`, `"quality": {"score": 0.5, "benchmark": "", "source": "", "date": "", "measured_on": ""}`, "quality score needs"},
		{"pinned revision", `hf:o/r:Q4_K_M`, `hf:o/r:Q4_K_M@main2`, "must not pin"},
		{"not positive size", `"params_b": 0.6`, `"params_b": 0`, "params_b"},
		{"moe without active", `"kind": "dense"`, `"kind": "moe"`, "active parameters"},
		{"unknown capability", `"capabilities": []`, `"capabilities": ["telepathy"]`, "capability"},
		{"unknown shape", `"base": "qwen3-0.6b"`, `"base": "qwen9"`, "not one of synth's shapes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(good, tc.from, tc.to, 1)
			_, err := Parse([]byte(bad))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestDerivedParams holds each entry's derived header to the parameter
// counts its model card states: a wrong hyperparameter shows up here.
func TestDerivedParams(t *testing.T) {
	c := mustLoad(t)
	for _, e := range c.Entries {
		s, err := e.Shape.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		q := synth.Quant(e.Variants[0].Quant)
		m, err := DeriveModel(s, q)
		if err != nil {
			t.Errorf("%s: %v", e.ID, err)
			continue
		}
		total, active := params(m)
		if r := total / 1e9 / e.Class.ParamsB; r < 0.93 || r > 1.07 {
			t.Errorf("%s: derived %.2fB parameters, the card says %.2fB", e.ID, total/1e9, e.Class.ParamsB)
		}
		if e.Class.ActiveParams != nil {
			if r := active / 1e9 / *e.Class.ActiveParams; r < 0.85 || r > 1.15 {
				t.Errorf("%s: derived %.2fB active parameters, the card says %.2fB", e.ID, active/1e9, *e.Class.ActiveParams)
			}
		}
	}
}

// params counts all parameters and those one token uses: routed experts
// scaled by used/total, and the embedding left out when it is a lookup
// only (not tied to the output), as model cards count active parameters.
func params(m *gguf.Model) (total, active float64) {
	am, err := arch.FromGGUF(m)
	frac := 1.0
	if err == nil && am.NExpert > 0 {
		frac = float64(am.NExpertUsed) / float64(am.NExpert)
	}
	for _, t := range m.Tensors {
		n := float64(t.Elements())
		total += n
		switch {
		case strings.Contains(t.Name, "_exps."):
			n *= frac
		case t.Name == "token_embd.weight" && err == nil && !am.TiedOutput:
			n = 0
		}
		active += n
	}
	return total, active
}

// TestDeriveMatchesSynth holds the fast derivation to synth.Build's own
// header, for a BPE, an SPM and an MoE shape, Gemma 3n (a second table
// with a row per token) and Qwen3-Next.
func TestDeriveMatchesSynth(t *testing.T) {
	for _, tc := range []struct {
		shape string
		q     synth.Quant
	}{{"qwen3-0.6b", synth.Q4_K_M}, {"gemma-3-1b", synth.Q8_0}, {"llama-3.2-1b", synth.F16}, {"deepseek-v2-lite", synth.Q4_K_M}, {"gemma-3n-e2b", synth.Q8_0}, {"qwen3-next-80b-a3b", synth.Q4_K_M}} {
		s, _ := synth.Lookup(tc.shape)
		b, err := synth.Build(s, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		full, err := b.Layout()
		if err != nil {
			t.Fatal(err)
		}
		fm, _ := gguf.NewModel(full)
		dm, err := DeriveModel(s, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		if len(fm.Tensors) != len(dm.Tensors) {
			t.Fatalf("%s: %d tensors, synth has %d", tc.shape, len(dm.Tensors), len(fm.Tensors))
		}
		// The same tensors; a quantized recipe's in llama-quantize's
		// order, laid out one after the other as synth lays its own.
		if tc.q.Quantized() {
			synth.QuantizerOrder(full.Tensors)
			var off uint64
			for i := range full.Tensors {
				full.Tensors[i].Offset = off
				off += (full.Tensors[i].Size + full.Alignment - 1) / full.Alignment * full.Alignment
			}
		}
		for i, want := range full.Tensors {
			got := dm.Tensors[i]
			if got.Name != want.Name || got.Type != want.Type || got.Size != want.Size || got.Offset != want.Offset || len(got.Shape) != len(want.Shape) {
				t.Fatalf("%s: tensor %d is %s %s %v %d@%d, synth has %s %s %v %d@%d", tc.shape, i, got.Name, got.Type, got.Shape, got.Size, got.Offset,
					want.Name, want.Type, want.Shape, want.Size, want.Offset)
			}
		}
		fa, err := arch.FromGGUF(fm)
		if err != nil {
			t.Fatal(err)
		}
		da, err := arch.FromGGUF(dm)
		if err != nil {
			t.Fatal(err)
		}
		if fa.NVocab != da.NVocab || fa.NLayer != da.NLayer || fa.Window != da.Window || fa.NExpert != da.NExpert || fa.MLA != da.MLA || fa.TiedOutput != da.TiedOutput {
			t.Errorf("%s: derived arch model differs from synth's", tc.shape)
		}
		for i := range fa.Layers {
			if fa.Layers[i] != da.Layers[i] {
				t.Errorf("%s: layer %d is %+v, synth's is %+v", tc.shape, i, da.Layers[i], fa.Layers[i])
			}
		}
		if d := fm.Size() - dm.Size(); d < 0 || d > 16<<20 {
			t.Errorf("%s: derived size %d is %d below synth's %d; only the tokenizer text may be missing", tc.shape, dm.Size(), d, fm.Size())
		}
	}
}
