package synth

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

// TestRecipesMatchQuantizer holds every recipe to the types llama-quantize
// (the measured engine's, commit 80fb11a) gave each tensor of synth's F16
// files, recorded in testdata/quantizer.txt by conformance/cmd/quantcheck.
// The catalog's sizes come from these recipes, so a rule that drifts from
// the quantizer's fails here without the quantizer at hand.
func TestRecipesMatchQuantizer(t *testing.T) {
	sections, err := readQuantizerGolden("testdata/quantizer.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(sections) == 0 {
		t.Fatal("testdata/quantizer.txt holds no sections")
	}
	seen := map[string]bool{}
	for _, sec := range sections {
		seen[sec.shape] = true
		q, err := ParseQuant(sec.quant)
		if err != nil {
			t.Fatalf("%s: %v", sec.shape, err)
		}
		m := model(t, sec.shape, q)
		mine := map[string]gguf.GGMLType{}
		for _, ti := range m.Tensors {
			mine[ti.Name] = ti.Type
			if _, ok := sec.types[ti.Name]; !ok {
				t.Errorf("%s %s: synth writes %s, the quantizer's output has no such tensor", sec.shape, sec.quant, ti.Name)
			}
		}
		bad := 0
		for name, want := range sec.types {
			got, ok := mine[name]
			switch {
			case !ok:
				t.Errorf("%s %s: synth lacks %s", sec.shape, sec.quant, name)
			case got != want:
				// One line per tensor would bury a rule's failure under a
				// layer count's worth of lines.
				if bad++; bad <= 5 {
					t.Errorf("%s %s: %s is %s, llama-quantize chose %s", sec.shape, sec.quant, name, got, want)
				}
			}
		}
		if bad > 5 {
			t.Errorf("%s %s: %d tensors differ in all", sec.shape, sec.quant, bad)
		}
	}
	// Every shape is compared, so a new one cannot join the catalog
	// without its recipe being checked.
	for _, name := range Names() {
		if !seen[name] {
			t.Errorf("shape %s has no section in testdata/quantizer.txt (run conformance/cmd/quantcheck -golden)", name)
		}
	}
}

type quantizerSection struct {
	shape, quant string
	types        map[string]gguf.GGMLType
}

// readQuantizerGolden reads the format quantcheck's writeGolden describes:
// "== SHAPE QUANT" sections of "NAME TYPE" and "blk.*.REST L-L:TYPE L:TYPE"
// lines.
func readQuantizerGolden(path string) ([]quantizerSection, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []quantizerSection
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if fields[0] == "==" {
			if len(fields) != 3 {
				return nil, fmt.Errorf("%s:%d: want == SHAPE QUANT", path, n)
			}
			out = append(out, quantizerSection{shape: fields[1], quant: fields[2], types: map[string]gguf.GGMLType{}})
			continue
		}
		if len(out) == 0 || len(fields) < 2 {
			return nil, fmt.Errorf("%s:%d: %q outside a section or without a type", path, n, line)
		}
		sec := out[len(out)-1]
		if err := addGoldenLine(sec.types, fields); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
	}
	return out, sc.Err()
}

func addGoldenLine(types map[string]gguf.GGMLType, fields []string) error {
	rest, block := strings.CutPrefix(fields[0], "blk.*.")
	if !block {
		if len(fields) != 2 {
			return fmt.Errorf("want NAME TYPE, got %q", strings.Join(fields, " "))
		}
		typ, ok := gguf.ParseGGMLType(fields[1])
		if !ok {
			return fmt.Errorf("unknown type %q", fields[1])
		}
		types[fields[0]] = typ
		return nil
	}
	for _, run := range fields[1:] {
		layers, name, ok := strings.Cut(run, ":")
		typ, known := gguf.ParseGGMLType(name)
		if !ok || !known {
			return fmt.Errorf("bad run %q", run)
		}
		lo, hi, isRange := strings.Cut(layers, "-")
		if !isRange {
			hi = lo
		}
		first, err1 := strconv.Atoi(lo)
		last, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || first > last {
			return fmt.Errorf("bad layers %q", layers)
		}
		for i := first; i <= last; i++ {
			types["blk."+strconv.Itoa(i)+"."+rest] = typ
		}
	}
	return nil
}

// TestRecipeRules pins rules no shape in the catalog reaches, read from
// llama_tensor_get_type_impl, and the fallback chain's last step.
func TestRecipeRules(t *testing.T) {
	mixtral, _ := Lookup("llama-3.1-8b")
	mixtral.MoE = &MoE{Experts: 8, Used: 2, FF: 14336}
	llama65, _ := Lookup("llama-3.1-70b")
	llama65.HeadsKV = llama65.Heads
	tests := []struct {
		name   string
		shape  Shape
		quant  Quant
		tensor string
		want   gguf.GGMLType
	}{
		// Eight experts: attention K and V in Q8_0 whatever the recipe,
		// and the attention output in Q5_K under Q4_K_M.
		{"8 experts attn_v", mixtral, Q4_K_M, "blk.5.attn_v.weight", gguf.TypeQ8_0},
		{"8 experts attn_v Q6_K", mixtral, Q6_K, "blk.5.attn_v.weight", gguf.TypeQ8_0},
		{"8 experts attn_k", mixtral, Q5_K_M, "blk.5.attn_k.weight", gguf.TypeQ8_0},
		{"8 experts attn_output", mixtral, Q4_K_M, "blk.5.attn_output.weight", gguf.TypeQ5_K},
		{"8 experts attn_output Q5_K_M", mixtral, Q5_K_M, "blk.5.attn_output.weight", gguf.TypeQ5_K},
		{"8 experts attn_q", mixtral, Q4_K_M, "blk.5.attn_q.weight", gguf.TypeQ4_K},
		// Without grouped KV heads an 80-layer llama is a 65B: no 70B bump.
		{"65B attn_v", llama65, Q4_K_M, "blk.10.attn_v.weight", gguf.TypeQ4_K},
	}
	for _, tc := range tests {
		b, err := Build(tc.shape, tc.quant)
		if err != nil {
			t.Fatal(err)
		}
		f, err := b.Layout()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, ti := range f.Tensors {
			if ti.Name == tc.tensor {
				found = true
				if ti.Type != tc.want {
					t.Errorf("%s: %s is %s, want %s", tc.name, tc.tensor, ti.Type, tc.want)
				}
			}
		}
		if !found {
			t.Errorf("%s: no tensor %s", tc.name, tc.tensor)
		}
	}

	for _, tc := range []struct {
		typ  gguf.GGMLType
		cols uint64
		want gguf.GGMLType
	}{
		{gguf.TypeQ4_K, 4096, gguf.TypeQ4_K},
		{gguf.TypeQ4_K, 896, gguf.TypeQ5_0},
		{gguf.TypeQ5_K, 896, gguf.TypeQ5_1},
		{gguf.TypeQ6_K, 2880, gguf.TypeQ8_0},
		{gguf.TypeQ6_K, 100, gguf.TypeF16},
		{gguf.TypeQ8_0, 100, gguf.TypeF16},
	} {
		if got := fallback(tc.typ, tc.cols); got != tc.want {
			t.Errorf("fallback(%s, %d) = %s, want %s", tc.typ, tc.cols, got, tc.want)
		}
	}
}

// An older llama-quantize (QuantRules.OwnQKV) typed a fused attn_qkv by
// its own rule, the same in every layer; nothing else moves. Pythia 1.4B's
// counts are those build 4715 printed for the llama.cpp CI's files (the
// public cases metal-m4-ci-pythia-1.4b-*).
func TestOwnQKVRule(t *testing.T) {
	s, ok := Lookup("pythia-1.4b")
	if !ok {
		t.Fatal("no pythia-1.4b shape")
	}
	for _, tc := range []struct {
		q    Quant
		qkv  gguf.GGMLType
		want map[gguf.GGMLType]int
	}{
		{Q4_K_M, gguf.TypeQ5_K, map[gguf.GGMLType]int{gguf.TypeF32: 194, gguf.TypeQ4_K: 61, gguf.TypeQ5_K: 24, gguf.TypeQ6_K: 13}},
		{Q5_K_M, gguf.TypeQ6_K, map[gguf.GGMLType]int{gguf.TypeF32: 194, gguf.TypeQ5_K: 61, gguf.TypeQ6_K: 37}},
		{Q6_K, gguf.TypeQ6_K, nil},
		{Q8_0, gguf.TypeQ8_0, nil},
	} {
		b, err := BuildWith(s, tc.q, QuantRules{OwnQKV: true})
		if err != nil {
			t.Fatal(err)
		}
		f, err := b.Layout()
		if err != nil {
			t.Fatal(err)
		}
		now := map[string]gguf.GGMLType{}
		for _, ti := range model(t, "pythia-1.4b", tc.q).Tensors {
			now[ti.Name] = ti.Type
		}
		count := map[gguf.GGMLType]int{}
		for _, ti := range f.Tensors {
			count[ti.Type]++
			switch {
			case strings.HasSuffix(ti.Name, "attn_qkv.weight"):
				if ti.Type != tc.qkv {
					t.Errorf("%s: %s is %s under the old rule, want %s", tc.q, ti.Name, ti.Type, tc.qkv)
				}
			case ti.Type != now[ti.Name]:
				t.Errorf("%s: %s is %s under the old rule, %s under today's: only attn_qkv should move", tc.q, ti.Name, ti.Type, now[ti.Name])
			}
		}
		if tc.want != nil && !maps.Equal(count, tc.want) {
			t.Errorf("%s: %v tensors by type, build 4715 printed %v", tc.q, count, tc.want)
		}
	}
}
