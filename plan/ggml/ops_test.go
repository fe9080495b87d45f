package ggml

import (
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

// The constructors give ggml's shapes (ggml.c) and the allocator's view
// of each op.
func TestOpShapes(t *testing.T) {
	var c Ctx
	w := c.External("w", gguf.TypeF32, "CPU", 64, 128)
	x := c.Input("x", gguf.TypeF32, 64, 7)
	cases := []struct {
		name string
		got  *Tensor
		ne   [4]int64
		cls  class
	}{
		{"mul_mat", c.MulMat(w, x), [4]int64{128, 7, 1, 1}, other},
		{"permute", c.Permute(c.Reshape(x, 16, 4, 7), 0, 2, 1, 3), [4]int64{16, 7, 4, 1}, view},
		{"transpose", c.Transpose(x), [4]int64{7, 64, 1, 1}, view},
		{"concat", c.Concat(x, x, 1), [4]int64{64, 14, 1, 1}, other},
		{"sum_rows", c.SumRows(x), [4]int64{1, 7, 1, 1}, other},
		{"get_rows", c.GetRows(w, c.Input("ids", gguf.TypeI32, 3)), [4]int64{64, 3, 1, 1}, other},
		{"rms_norm", c.RMSNorm(x), [4]int64{64, 7, 1, 1}, inplace},
		{"norm", c.Norm(x), [4]int64{64, 7, 1, 1}, other},
		{"glu_fused", c.GLUFused(x), [4]int64{32, 7, 1, 1}, other},
		{"ssm_conv", c.SSMConv(c.Input("sx", gguf.TypeF32, 10, 8, 2), c.Input("cw", gguf.TypeF32, 4, 8)), [4]int64{8, 7, 2, 1}, other},
	}
	for _, tc := range cases {
		if tc.got.Ne() != tc.ne || tc.got.cls != tc.cls {
			t.Errorf("%s: ne %v class %d, want %v class %d", tc.name, tc.got.Ne(), tc.got.cls, tc.ne, tc.cls)
		}
	}
	// A view of a view points at the owner of the memory, and an op
	// writing into a tensor (set_rows) is a view of it with its sources
	// first.
	v := c.View(c.Reshape(w, 128, 64), 32)
	if v.view != w || v.bytes != 0 {
		t.Errorf("view of a view: owner %v, %d bytes", v.view, v.bytes)
	}
	s := c.SetRows(w, x, c.Input("idx", gguf.TypeI64, 7))
	if s.view != w || s.src[0] != x || s.src[2] != w || s.Type() != gguf.TypeF32 {
		t.Errorf("set_rows: %+v", s)
	}
	// A strided view holds ggml_nbytes: the first row and the strides of
	// the further dimensions.
	if sv := c.View(x, 8, 7).Strided(256); sv.span != 8*4+6*256 {
		t.Errorf("strided view spans %d", sv.span)
	}
}

// A GPU's offload_op judges an op by its batch (get_op_batch_size in
// ggml-cuda.cu, ggml_vk_get_op_batch_size in ggml-vulkan.cpp): a lookup
// never, a product by its columns, an expert product and a RoPE by their
// tokens, anything else by its rows.
func TestOffloadBatch(t *testing.T) {
	var c Ctx
	w := c.External("w", gguf.TypeF32, "CPU", 64, 128)
	x := c.Input("x", gguf.TypeF32, 64, 7)
	experts := c.External("exps", gguf.TypeF32, "CPU", 64, 32, 8)
	ids := c.Input("ids", gguf.TypeI32, 2, 7)
	heads := c.Reshape(x, 16, 4, 7)
	pos := c.Input("pos", gguf.TypeI32, 7)
	freqs := c.External("rope_freqs", gguf.TypeF32, "CPU", 8)
	for _, tc := range []struct {
		name string
		n    *Tensor
		want int64
	}{
		{"get_rows", c.GetRows(w, c.Input("tok", gguf.TypeI32, 7)), 0},
		{"mul_mat", c.MulMat(w, x), 7},
		{"mul_mat_id", c.MulMatID(experts, c.Reshape(x, 64, 1, 7), ids), 7},
		{"rope", c.Rope(heads, pos, freqs), 7},
		{"add", c.Add(x, x), 7},
		{"add of heads", c.Add(heads, heads), 28},
	} {
		if got := offloadBatch(tc.n); got != tc.want {
			t.Errorf("%s: batch %d, want %d", tc.name, got, tc.want)
		}
	}
}
