package synth

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

// fillTypes are the types Fill must encode, each as one tensor of the
// test file, with a norm weight and a router beside them.
var fillTypes = []gguf.GGMLType{
	gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ8_0, gguf.TypeQ4_0,
	gguf.TypeQ4_1, gguf.TypeQ5_0, gguf.TypeQ5_1, gguf.TypeQ4_K, gguf.TypeQ5_K,
	gguf.TypeQ6_K, gguf.TypeMXFP4,
}

// writeHoles writes a sparse GGUF file of the named tensors, each of
// 512x6 elements (whole blocks of every type), and returns its path and
// header.
func writeHoles(t *testing.T, tensors map[string]gguf.GGMLType) (string, *gguf.File) {
	t.Helper()
	b := gguf.NewBuilder()
	b.Set("general.architecture", gguf.StringValue("llama"))
	for _, name := range sortedKeys(tensors) {
		if err := b.AddTensor(name, tensors[name], []uint64{512, 6}, nil); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "holes.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := b.Layout()
	if err != nil {
		t.Fatal(err)
	}
	return path, f
}

func sortedKeys(m map[string]gguf.GGMLType) []string { return slices.Sorted(maps.Keys(m)) }

func typeTensors() map[string]gguf.GGMLType {
	m := map[string]gguf.GGMLType{}
	for _, ty := range fillTypes {
		m["blk.0."+strings.ToLower(ty.String())+".weight"] = ty
	}
	return m
}

func tensorBytesOf(t *testing.T, data []byte, f *gguf.File, name string) []byte {
	t.Helper()
	for _, ti := range f.Tensors {
		if ti.Name == name {
			at := uint64(f.DataOffset) + ti.Offset
			return data[at : at+ti.Size]
		}
	}
	t.Fatalf("no tensor %s", name)
	return nil
}

// TestFillDecodes fills a tensor of each type and decodes it with the
// test's own dequantizers: every scale a normal half, every weight finite,
// centred on zero (norms on one) with a spread near 0.02, and not constant.
func TestFillDecodes(t *testing.T) {
	tensors := typeTensors()
	tensors["blk.0.attn_norm.weight"] = gguf.TypeF32
	tensors["output_norm.weight"] = gguf.TypeF16
	path, f := writeHoles(t, tensors)
	if err := FillFile(context.Background(), path, f, func(string) bool { return true }, 7); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range sortedKeys(tensors) {
		t.Run(name, func(t *testing.T) {
			vals, err := dequant(tensors[name], tensorBytesOf(t, data, f, name))
			if err != nil {
				t.Fatal(err)
			}
			if len(vals) != 512*6 {
				t.Fatalf("decoded %d weights, want %d", len(vals), 512*6)
			}
			var sum, sq float64
			distinct := map[float64]bool{}
			for i, v := range vals {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("weight %d is %v", i, v)
				}
				if v != 0 && math.Abs(v) < 0x1p-14 && tensors[name] == gguf.TypeF16 {
					t.Fatalf("weight %d is %g, a subnormal half", i, v)
				}
				sum += v
				distinct[v] = true
			}
			mean := sum / float64(len(vals))
			for _, v := range vals {
				sq += (v - mean) * (v - mean)
			}
			sd := math.Sqrt(sq / float64(len(vals)))
			wantMean := 0.0
			if strings.HasSuffix(name, "norm.weight") {
				wantMean = 1
			}
			if math.Abs(mean-wantMean) > 0.005 {
				t.Errorf("mean %.4f, want %.0f within 0.005", mean, wantMean)
			}
			if sd < 0.01 || sd > 0.04 {
				t.Errorf("standard deviation %.4f, want 0.01 to 0.04", sd)
			}
			if len(distinct) < 8 {
				t.Errorf("only %d distinct weights", len(distinct))
			}
		})
	}
}

// TestFillSelection fills the routing tensors of a file and checks that
// every other byte, headers and other tensors alike, is as it was.
func TestFillSelection(t *testing.T) {
	tensors := map[string]gguf.GGMLType{
		"token_embd.weight":         gguf.TypeQ4_K,
		"blk.0.attn_norm.weight":    gguf.TypeF32,
		"blk.0.ffn_gate_inp.weight": gguf.TypeF32,
		"blk.0.exp_probs_b.bias":    gguf.TypeF32,
		"blk.0.attn_q.weight":       gguf.TypeQ4_K,
		"blk.0.ffn_up_exps.weight":  gguf.TypeQ6_K,
		"output.weight":             gguf.TypeQ6_K,
	}
	path, f := writeHoles(t, tensors)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := FillFile(context.Background(), path, f, WeightsRouted.Selects, 1); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	inside := make([]bool, len(after))
	for _, ti := range f.Tensors {
		got := tensorBytesOf(t, after, f, ti.Name)
		filled := !bytes.Equal(got, make([]byte, len(got)))
		if filled != RoutingTensor(ti.Name) {
			t.Errorf("%s filled %v, want %v", ti.Name, filled, RoutingTensor(ti.Name))
		}
		if filled {
			at := uint64(f.DataOffset) + ti.Offset
			for i := at; i < at+ti.Size; i++ {
				inside[i] = true
			}
		}
	}
	for i := range after {
		if !inside[i] && after[i] != before[i] {
			t.Fatalf("byte %d outside the filled tensors changed", i)
		}
	}
}

// TestFillDeterministic: one seed gives the same bytes, another seed
// others, and a tensor holds the same values whichever others are filled.
func TestFillDeterministic(t *testing.T) {
	fill := func(seed uint64, keep func(string) bool) ([]byte, *gguf.File) {
		path, f := writeHoles(t, typeTensors())
		if err := FillFile(context.Background(), path, f, keep, seed); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return data, f
	}
	all := func(string) bool { return true }
	a, f := fill(3, all)
	b, _ := fill(3, all)
	c, _ := fill(4, all)
	if !bytes.Equal(a, b) {
		t.Error("two fills with seed 3 differ")
	}
	if bytes.Equal(a, c) {
		t.Error("seeds 3 and 4 give the same bytes")
	}
	name := "blk.0.q4_k.weight"
	one, _ := fill(3, func(n string) bool { return n == name })
	if !bytes.Equal(tensorBytesOf(t, one, f, name), tensorBytesOf(t, a, f, name)) {
		t.Errorf("%s differs when filled alone", name)
	}
}

// TestFillRefusesType: a selected tensor of a type Fill does not encode is
// an error naming both, before anything is written.
func TestFillRefusesType(t *testing.T) {
	path, f := writeHoles(t, map[string]gguf.GGMLType{
		"blk.0.attn_k.weight": gguf.TypeQ4_K,
		"blk.0.attn_q.weight": gguf.TypeQ2_K,
	})
	before, _ := os.ReadFile(path)
	err := FillFile(context.Background(), path, f, func(string) bool { return true }, 1)
	if err == nil || !strings.Contains(err.Error(), "Q2_K") || !strings.Contains(err.Error(), "blk.0.attn_q.weight") {
		t.Fatalf("error %v, want one naming Q2_K and blk.0.attn_q.weight", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("the refused fill wrote to the file")
	}
}

func TestFillCancelled(t *testing.T) {
	path, f := writeHoles(t, typeTensors())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := FillFile(ctx, path, f, func(string) bool { return true }, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

// TestFillCoversRecipes: every tensor that a random twin of a built-in
// shape fills, under every recipe, is of a type Fill encodes.
func TestFillCoversRecipes(t *testing.T) {
	for _, n := range Names() {
		s, _ := Lookup(n)
		for q := range fileType {
			list, types := typedTensors(s, q, QuantRules{})
			for i, ty := range types {
				if _, ok := blockEncoders[ty]; !ok && !isFloat(ty) {
					t.Errorf("%s %s: %s is %s, which Fill does not encode", n, q, list[i].name, ty)
				}
			}
		}
	}
}

func TestRoutingTensor(t *testing.T) {
	for _, c := range []struct {
		name string
		want bool
	}{
		{"token_embd.weight", true},
		{"output_norm.weight", true},
		{"blk.3.attn_norm.weight", true},
		{"blk.3.attn_q_norm.weight", true},
		{"blk.3.ffn_gate_inp.weight", true},
		{"blk.3.ffn_gate_inp.bias", true},
		{"blk.3.exp_probs_b.bias", true},
		{"blk.3.ffn_gate_inp_shexp.weight", false},
		{"blk.3.ffn_up_exps.weight", false},
		{"blk.3.attn_q.weight", false},
		{"output.weight", false},
		{"token_embd_norm.bias", false},
	} {
		if got := RoutingTensor(c.name); got != c.want {
			t.Errorf("RoutingTensor(%q) = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestParseWeights(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Weights
		ok   bool
	}{
		{"zero", WeightsZero, true}, {"Routed", WeightsRouted, true}, {"RANDOM", WeightsRandom, true},
		{"", "", false}, {"ones", "", false},
	} {
		got, err := ParseWeights(c.in)
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("ParseWeights(%q) = %q, %v", c.in, got, err)
		}
	}
}

// TestF16Bits holds the half encoder to the test's decoder on values that
// round, carry into the exponent, fall below the normal range or beyond
// the largest half.
func TestF16Bits(t *testing.T) {
	for _, c := range []struct {
		in   float32
		want float64
	}{
		{1, 1}, {-2, -2}, {0.02, 0.0200042724609375}, {1 + 0x1p-11, 1}, {1 + 3*0x1p-11, 1 + 0x1p-9},
		{2 - 0x1p-12, 2}, {0x1p-14, 0x1p-14}, {0x1p-15, 0}, {-1e-6, 0}, {1e6, 65504},
	} {
		got, ok := half(f16bits(c.in))
		if got != c.want || !ok {
			t.Errorf("f16bits(%g) decodes to %g (normal %v), want %g", c.in, got, ok, c.want)
		}
	}
}
