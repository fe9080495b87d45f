package plan

import (
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/synth"
)

func model(t testing.TB, shape string, q synth.Quant) *arch.Model {
	t.Helper()
	s, ok := synth.Lookup(shape)
	if !ok {
		t.Fatalf("no shape %s", shape)
	}
	return shapeQuantModel(t, s, q)
}

// shapeQuantModel reads the header synth writes for a shape, as a sparse
// file: header bytes, then zeros, so even a 70B shape costs a few MiB.
func shapeQuantModel(t testing.TB, s synth.Shape, q synth.Quant) *arch.Model {
	t.Helper()
	m, err := synth.Model(s, q)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// mib converts llama.cpp's printed "%8.2f MiB" back to the bytes range it
// stands for and reports whether n falls in it.
func printedMiB(n int64, printed float64) bool {
	return int64(printed*(1<<20)-0.005*(1<<20)) <= n && n <= int64(printed*(1<<20)+0.005*(1<<20))
}

// The figures are from llama.cpp's log for a TinyLlama-shaped Q4_K_M
// file loaded on the CPU backend (AVX2) with n_ctx 4096, one sequence,
// flash attention off, batch 512 (node-llama-cpp 3.21.1).
func TestTinyLlamaCPU(t *testing.T) {
	m := model(t, "tinyllama-1.1b", synth.Q4_K_M)
	p := Defaults()
	p.Ctx, p.FlashAttn, p.Batch = 4096, FlashOff, 512
	cpu := Device{Name: "CPU", Backend: "CPU", Features: []string{"avx2"}}
	r, err := Account(m, p, cpu, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"CPU_Mapped/model": 636.18, "CPU_REPACK/model": 455.06, "CPU/kv": 88.00, "CPU/output": 0.12}
	for _, b := range r.Buffers {
		key := b.BufferType + "/" + string(b.Kind)
		if w, ok := want[key]; ok {
			if !printedMiB(b.Bytes, w) {
				t.Errorf("%s: %d bytes = %.2f MiB, llama.cpp printed %.2f", key, b.Bytes, float64(b.Bytes)/(1<<20), w)
			}
			delete(want, key)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing buffers %v in\n%s", want, r)
	}
}

// byType sums the buffers of one kind by buffer type.
func byType(bufs []Buffer, kind BufferKind) map[string]int64 {
	out := map[string]int64{}
	for _, b := range bufs {
		if b.Kind == kind {
			out[b.BufferType] += b.Bytes
		}
	}
	return out
}

// Which weights the CPU backend keeps a repacked copy of (x86 with AVX2,
// Q4_K): projections by name, with MLA's low-rank query up-projection
// among them (DeepSeek V3's and Kimi K2's attn_q_b: measured, 20.25 MiB
// per layer of Kimi K2 at Q4_K_M that llama-server logged in CPU_REPACK),
// and not norms, biases, the embedding or a row count the interleave
// does not divide.
func TestRepackable(t *testing.T) {
	cpu := Device{Name: "CPU", Backend: "CPU", Features: []string{"avx2"}}
	tensor := func(name string, typ gguf.GGMLType, shape ...uint64) arch.Tensor {
		return arch.Tensor{Tensor: gguf.Tensor{TensorInfo: gguf.TensorInfo{Name: name, Type: typ, Shape: shape}}, Layer: 0}
	}
	for _, tc := range []struct {
		t    arch.Tensor
		want bool
	}{
		{tensor("blk.0.attn_q.weight", gguf.TypeQ4_K, 4096, 4096), true},
		{tensor("blk.0.attn_q_b.weight", gguf.TypeQ4_K, 1536, 12288), true},
		{tensor("blk.0.attn_kv_b.weight", gguf.TypeQ4_K, 512, 32768), true},
		{tensor("blk.0.attn_q_a_norm.weight", gguf.TypeF32, 1536), false},
		{tensor("blk.0.exp_probs_b.bias", gguf.TypeF32, 384), false},
		{tensor("blk.0.attn_q.weight", gguf.TypeQ5_K, 4096, 4096), false},
		{tensor("blk.0.attn_q.weight", gguf.TypeQ4_K, 4096, 4100), false},
		{arch.Tensor{Tensor: gguf.Tensor{TensorInfo: gguf.TensorInfo{Name: "token_embd.weight", Type: gguf.TypeQ4_K, Shape: []uint64{4096, 32000}}}, Layer: arch.InputLayer}, false},
	} {
		if got := repackable(cpu, tc.t); got != tc.want {
			t.Errorf("%s %v %v: repackable %v, want %v", tc.t.Name, tc.t.Type, tc.t.Shape, got, tc.want)
		}
	}
}
