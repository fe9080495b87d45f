package ggml

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

// Every op constructor against ggml.c's rule for the result: its shape
// (ne), its element type, the sources in ggml's order, how the allocator
// treats it (its own memory, a candidate for in-place reuse, or a view of
// another tensor's memory) and the bytes it needs. The expected values are
// worked out from ggml.c by hand in each row's comment; the inputs are
// small and of different types, so that a rule that takes the wrong
// operand's dimension or type shows.
func TestOpConstructors(t *testing.T) {
	var c Ctx
	const (
		f32 = gguf.TypeF32
		f16 = gguf.TypeF16
		i32 = gguf.TypeI32
		i64 = gguf.TypeI64
	)
	x := c.Input("x", f32, 64, 7)             // 64*7*4 = 1792 bytes
	h := c.Input("h", f16, 64, 7)             // 64*7*2 = 896 bytes
	w := c.External("w", f16, "CPU", 64, 128) // a weight: 128 rows of 64
	k := c.Input("k", f16, 64, 32, 2)         // 32 cells of 2 KV heads
	q := c.Input("q", f32, 64, 7, 8)          // 7 tokens of 8 heads
	v := c.Input("v", f16, 48, 32, 2)         // V rows narrower than K's
	bias := c.Input("bias", f32, 64)          // one row, broadcast
	ids := c.Input("ids", i32, 2, 7)          // 2 experts per token
	exps := c.External("exps", f16, "CPU", 64, 128, 8)
	pos := c.Input("pos", i32, 7)               // one position per token
	freqs := c.External("freqs", f32, "CPU", 8) // rope frequency factors
	kq := c.Input("kq", f32, 32, 7, 8)
	mask := c.Input("mask", f16, 32, 7)
	sinks := c.Input("sinks", f32, 8)
	tok := c.Input("tok", i32, 5)
	probs := c.Input("probs", f32, 1, 8, 7)
	sel := c.Input("sel", i32, 2, 7)
	cache := c.External("cache_k", f16, "CPU", 64, 100)
	idx := c.Input("idx", i64, 7)
	heads := c.Reshape(x, 16, 4, 7)
	b3 := c.Reshape(x, 64, 1, 7)
	a3 := c.Input("a3", f32, 128, 2, 7)
	b2 := c.Input("b2", f32, 128, 8)
	x32 := c.Input("x32", f32, 32, 7)
	sx := c.Input("sx", f32, 10, 8, 2)
	cw := c.Input("cw", f32, 4, 8)
	ssmS := c.Input("s", f32, 16, 8, 4, 2)
	ssmX := c.Input("xs", f32, 8, 4, 5, 2)
	seqs := c.Input("seqs", i32, 2)
	dv := c.Input("dv", f32, 16, 4, 5, 2)
	kvView := c.View(cache, 64, 7)

	type row struct {
		name  string
		got   *Tensor
		op    Op
		typ   gguf.GGMLType
		ne    [4]int64
		cls   class
		bytes int64     // the tensor's own memory: 0 for a view
		srcs  []*Tensor // in ggml's order
		owner *Tensor   // the tensor whose memory a view uses
	}
	rows := []row{
		// ggml_mul_mat: {a.ne1, b.ne1, b.ne2, b.ne3}, always F32 (the
		// F16 weight does not make an F16 result): 128*7*4.
		{"mul_mat", c.MulMat(w, x), MulMat, f32, [4]int64{128, 7, 1, 1}, other, 3584, []*Tensor{w, x}, nil},
		// K (2 heads) broadcast over Q's 8 heads: {32, 7, 8, 1}, 32*7*8*4.
		{"mul_mat broadcast", c.MulMat(k, q), MulMat, f32, [4]int64{32, 7, 8, 1}, other, 7168, []*Tensor{k, q}, nil},
		// ggml_mul_mat_id: {as.ne1, ids.ne0, b.ne2, 1}: 128*2*7*4.
		{"mul_mat_id", c.MulMatID(exps, b3, ids), MulMatID, f32, [4]int64{128, 2, 7, 1}, other, 7168, []*Tensor{exps, b3, ids}, nil},
		// ggml_add and friends: ggml_dup_tensor(a), b broadcast into it;
		// they may run in place (ggml_op_can_inplace).
		{"add broadcast", c.Add(x, bias), Add, f32, [4]int64{64, 7, 1, 1}, inplace, 1792, []*Tensor{x, bias}, nil},
		{"add keeps a's type", c.Add(h, x), Add, f16, [4]int64{64, 7, 1, 1}, inplace, 896, []*Tensor{h, x}, nil},
		{"sub", c.Sub(x, bias), Sub, f32, [4]int64{64, 7, 1, 1}, inplace, 1792, []*Tensor{x, bias}, nil},
		{"mul", c.Mul(x, bias), Mul, f32, [4]int64{64, 7, 1, 1}, inplace, 1792, []*Tensor{x, bias}, nil},
		{"div", c.Div(x, bias), Div, f32, [4]int64{64, 7, 1, 1}, inplace, 1792, []*Tensor{x, bias}, nil},
		// ggml_add_id: dup(a), sources a, b, ids: 128*2*7*4.
		{"add_id", c.AddID(a3, b2, ids), AddID, f32, [4]int64{128, 2, 7, 1}, inplace, 7168, []*Tensor{a3, b2, ids}, nil},
		// Element-wise unary ops are dup(a): an F16 input stays F16.
		{"scale", c.Scale(h), Scale, f16, [4]int64{64, 7, 1, 1}, inplace, 896, []*Tensor{h}, nil},
		{"sqr", c.Sqr(x), Sqr, f32, [4]int64{64, 7, 1, 1}, inplace, 1792, []*Tensor{x}, nil},
		{"sqrt", c.Sqrt(x), Sqrt, f32, [4]int64{64, 7, 1, 1}, inplace, 1792, []*Tensor{x}, nil},
		{"unary", c.Unary(h), Unary, f16, [4]int64{64, 7, 1, 1}, inplace, 896, []*Tensor{h}, nil},
		{"rms_norm", c.RMSNorm(x), RMSNorm, f32, [4]int64{64, 7, 1, 1}, inplace, 1792, []*Tensor{x}, nil},
		// NORM and L2_NORM are not in ggml_op_can_inplace.
		{"norm", c.Norm(x), Norm, f32, [4]int64{64, 7, 1, 1}, other, 1792, []*Tensor{x}, nil},
		{"l2_norm", c.L2Norm(x), L2Norm, f32, [4]int64{64, 7, 1, 1}, other, 1792, []*Tensor{x}, nil},
		// ggml_sum_rows and ggml_mean: one element per row, {1, 7}: 7*4.
		{"sum_rows", c.SumRows(x), SumRows, f32, [4]int64{1, 7, 1, 1}, other, 28, []*Tensor{x}, nil},
		{"mean", c.Mean(x), Mean, f32, [4]int64{1, 7, 1, 1}, other, 28, []*Tensor{x}, nil},
		// ggml_repeat_4d and ggml_pad: the shape asked for.
		{"repeat", c.Repeat(bias, 64, 7), Repeat, f32, [4]int64{64, 7, 1, 1}, other, 1792, []*Tensor{bias}, nil},
		{"pad", c.Pad(x, 80, 7), Pad, f32, [4]int64{80, 7, 1, 1}, other, 2240, []*Tensor{x}, nil},
		// ggml_concat: ne[dim] = a.ne[dim] + b.ne[dim]: {96, 7}, 96*7*4,
		// and along dim 2 {64, 7, 16}, 64*7*16*4.
		{"concat dim 0", c.Concat(x, x32, 0), Concat, f32, [4]int64{96, 7, 1, 1}, other, 2688, []*Tensor{x, x32}, nil},
		{"concat dim 2", c.Concat(q, q, 2), Concat, f32, [4]int64{64, 7, 16, 1}, other, 28672, []*Tensor{q, q}, nil},
		// ggml_argsort: I32 indices of a's shape.
		{"argsort", c.Argsort(x), Argsort, i32, [4]int64{64, 7, 1, 1}, other, 1792, []*Tensor{x}, nil},
		// ggml_rope_ext: dup(a), sources a, positions and (when given)
		// the frequency factors; it may run in place.
		{"rope", c.Rope(heads, pos, nil), Rope, f32, [4]int64{16, 4, 7, 1}, inplace, 1792, []*Tensor{heads, pos}, nil},
		{"rope with freqs", c.Rope(heads, pos, freqs), Rope, f32, [4]int64{16, 4, 7, 1}, inplace, 1792, []*Tensor{heads, pos, freqs}, nil},
		// ggml_soft_max_ext: dup(a); the mask and the sinks follow a, in
		// that order, and an absent one leaves no hole.
		{"soft_max", c.SoftMax(kq, nil, nil), SoftMax, f32, [4]int64{32, 7, 8, 1}, inplace, 7168, []*Tensor{kq}, nil},
		{"soft_max mask", c.SoftMax(kq, mask, nil), SoftMax, f32, [4]int64{32, 7, 8, 1}, inplace, 7168, []*Tensor{kq, mask}, nil},
		{"soft_max sinks", c.SoftMax(kq, nil, sinks), SoftMax, f32, [4]int64{32, 7, 8, 1}, inplace, 7168, []*Tensor{kq, sinks}, nil},
		{"soft_max both", c.SoftMax(kq, mask, sinks), SoftMax, f32, [4]int64{32, 7, 8, 1}, inplace, 7168, []*Tensor{kq, mask, sinks}, nil},
		// ggml_flash_attn_ext: {v.ne0, q.ne2, q.ne1, q.ne3}, F32: V's 48
		// columns, then heads before tokens: 48*8*7*4.
		{"flash_attn_ext", c.FlashAttnExt(q, k, v, mask, nil), FlashAttnExt, f32, [4]int64{48, 8, 7, 1}, other, 10752, []*Tensor{q, k, v, mask}, nil},
		{"flash_attn_ext sinks", c.FlashAttnExt(q, k, v, mask, sinks), FlashAttnExt, f32, [4]int64{48, 8, 7, 1}, other, 10752, []*Tensor{q, k, v, mask, sinks}, nil},
		// ggml_glu_split keeps a's shape; ggml_glu on one tensor halves
		// its rows: {32, 7}, 32*7*4.
		{"glu split", c.GLU(x, x), GLU, f32, [4]int64{64, 7, 1, 1}, other, 1792, []*Tensor{x, x}, nil},
		{"glu fused", c.GLUFused(x), GLU, f32, [4]int64{32, 7, 1, 1}, other, 896, []*Tensor{x}, nil},
		// ggml_get_rows: {a.ne0, b.ne0, b.ne1, b.ne2}, F32 for an F16
		// table: 64*5*4; the MoE weights' lookup {1, 2, 7}: 2*7*4.
		{"get_rows", c.GetRows(w, tok), GetRows, f32, [4]int64{64, 5, 1, 1}, other, 1280, []*Tensor{w, tok}, nil},
		{"get_rows 3d", c.GetRows(probs, sel), GetRows, f32, [4]int64{1, 2, 7, 1}, other, 56, []*Tensor{probs, sel}, nil},
		// ggml_set_rows is ggml_view_tensor(dst): the cache's type and
		// shape, no memory of its own, sources rows, indices, dst.
		{"set_rows", c.SetRows(cache, x, idx), SetRows, f16, [4]int64{64, 100, 1, 1}, view, 0, []*Tensor{x, idx, cache}, cache},
		// ggml_cpy(a, b) is ggml_view_tensor(b): b's type and shape, and
		// the owner of b's memory (the cache, not the view of it).
		{"cpy", c.Cpy(x, kvView), Cpy, f16, [4]int64{64, 7, 1, 1}, view, 0, []*Tensor{x, kvView}, cache},
		// ggml_cast: a CPY into a new tensor of the type: 64*7*2, and
		// Q8_0's 34-byte blocks of 32: 2 blocks a row, 7*68.
		{"cast f16", c.Cast(x, f16), Cpy, f16, [4]int64{64, 7, 1, 1}, other, 896, []*Tensor{x}, nil},
		{"cast q8_0", c.Cast(x, gguf.TypeQ8_0), Cpy, gguf.TypeQ8_0, [4]int64{64, 7, 1, 1}, other, 476, []*Tensor{x}, nil},
		// ggml_cont keeps the shape (a transposed view's); ggml_cont_1d
		// takes a new one.
		{"cont", c.Cont(c.Transpose(x)), Cont, f32, [4]int64{7, 64, 1, 1}, other, 1792, nil, nil},
		{"cont_1d", c.Cont(x, 448), Cont, f32, [4]int64{448, 1, 1, 1}, other, 1792, []*Tensor{x}, nil},
		// The view ops: no memory, the source's type.
		{"view", c.View(x, 32, 7), View, f32, [4]int64{32, 7, 1, 1}, view, 0, []*Tensor{x}, x},
		{"view of a view", c.View(heads, 16, 2), View, f32, [4]int64{16, 2, 1, 1}, view, 0, []*Tensor{heads}, x},
		{"reshape", c.Reshape(h, 16, 4, 7), Reshape, f16, [4]int64{16, 4, 7, 1}, view, 0, []*Tensor{h}, h},
		// ggml_permute: ne[axis_i] = a.ne[i]. (0,2,1,3) swaps the middle
		// two; (2,0,1,3) sends dim 0 to 2, 1 to 0, 2 to 1.
		{"permute 0213", c.Permute(heads, 0, 2, 1, 3), Permute, f32, [4]int64{16, 7, 4, 1}, view, 0, []*Tensor{heads}, x},
		{"permute 2013", c.Permute(heads, 2, 0, 1, 3), Permute, f32, [4]int64{4, 7, 16, 1}, view, 0, []*Tensor{heads}, x},
		{"transpose", c.Transpose(h), Transpose, f16, [4]int64{7, 64, 1, 1}, view, 0, []*Tensor{h}, h},
		// ggml_scale_inplace and ggml_clamp are views of a.
		{"scale_inplace", c.ScaleInplace(x), Scale, f32, [4]int64{64, 7, 1, 1}, view, 0, []*Tensor{x}, x},
		{"clamp", c.Clamp(h), Clamp, f16, [4]int64{64, 7, 1, 1}, view, 0, []*Tensor{h}, h},
		// ggml_ssm_conv: {d_inner = sx.ne1, n_t = sx.ne0 - d_conv + 1,
		// n_s = sx.ne2}: {8, 7, 2}, 8*7*2*4.
		{"ssm_conv", c.SSMConv(sx, cw), SSMConv, f32, [4]int64{8, 7, 2, 1}, other, 448, []*Tensor{sx, cw}, nil},
		// ggml_ssm_scan: the outputs (all of x: 8*4*5*2 = 320) then one
		// state per sequence (16*8*4 each, 2 sequences: 1024), 1D.
		{"ssm_scan", c.SSMScan(ssmS, ssmX, x, x, x, x, seqs), SSMScan, f32, [4]int64{1344, 1, 1, 1}, other, 5376, []*Tensor{ssmS, ssmX, x, x, x, x, seqs}, nil},
		// ggml_gated_delta_net: {S_v*H, tokens*seqs + S_v*seqs} with
		// S_v 16, H 4, 5 tokens, 2 sequences: {64, 42}, 64*42*4.
		{"gated_delta_net", c.GatedDeltaNet(dv, dv, dv, x, x, x, 1), GatedDeltaNet, f32, [4]int64{64, 42, 1, 1}, other, 10752, []*Tensor{dv, dv, dv, x, x, x}, nil},
	}
	for _, r := range rows {
		g := r.got
		if g.op != r.op || g.Type() != r.typ || g.Ne() != r.ne || g.cls != r.cls || g.bytes != r.bytes {
			t.Errorf("%s: op %d %v %v class %d %d bytes, want op %d %v %v class %d %d bytes",
				r.name, g.op, g.Type(), g.Ne(), g.cls, g.bytes, r.op, r.typ, r.ne, r.cls, r.bytes)
		}
		if r.srcs != nil && !slices.Equal(g.src, r.srcs) {
			t.Errorf("%s: sources %v, want %v", r.name, names(g.src), names(r.srcs))
		}
		if g.view != r.owner {
			t.Errorf("%s: views %v, want %v", r.name, names([]*Tensor{g.view}), names([]*Tensor{r.owner}))
		}
		if g.owner() != cmp.Or(r.owner, g) {
			t.Errorf("%s: memory of %v", r.name, names([]*Tensor{g.owner()}))
		}
	}
}

// ggml.c gives these ops' results the type of their first source
// (ggml_new_tensor(ctx, a->type, ...) or ggml_dup_tensor(a); ggml_get_rows
// keeps an I32 table's type), not F32: an F16 or I32 input sized as F32
// would take twice the memory, and reuse in place compares layouts, types
// included.
func TestResultTypes(t *testing.T) {
	var c Ctx
	h := c.Input("h", gguf.TypeF16, 64, 7)
	heads := c.Reshape(h, 16, 4, 7)
	table := c.Input("table", gguf.TypeI32, 4, 10)
	rows := c.Input("rows", gguf.TypeI32, 3)
	for _, tc := range []struct {
		name string
		got  *Tensor
		typ  gguf.GGMLType
	}{
		{"concat", c.Concat(h, h, 1), gguf.TypeF16},                                 // ggml_concat: a->type
		{"repeat", c.Repeat(h, 64, 14), gguf.TypeF16},                               // ggml_repeat_4d: a->type
		{"pad", c.Pad(h, 80, 7), gguf.TypeF16},                                      // ggml_pad_ext: a->type
		{"sum_rows", c.SumRows(h), gguf.TypeF16},                                    // ggml_sum_rows: a->type
		{"rope", c.Rope(heads, c.Input("pos", gguf.TypeI32, 7), nil), gguf.TypeF16}, // dup(a)
		{"soft_max", c.SoftMax(h, nil, nil), gguf.TypeF16},                          // dup(a)
		{"glu split", c.GLU(h, h), gguf.TypeF16},                                    // ggml_glu_impl: a->type
		{"glu fused", c.GLUFused(h), gguf.TypeF16},                                  // ggml_glu_impl: a->type
		{"get_rows of I32", c.GetRows(table, rows), gguf.TypeI32},                   // I32 table: I32
	} {
		if tc.got.Type() != tc.typ {
			t.Errorf("%s: %v, ggml gives %v", tc.name, tc.got.Type(), tc.typ)
		}
	}
}

// names lists tensors for a failure message, by name or op.
func names(ts []*Tensor) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		switch {
		case t == nil:
			out[i] = "<nil>"
		case t.Name != "":
			out[i] = t.Name
		default:
			out[i] = fmt.Sprintf("op%d", t.op)
		}
	}
	return out
}

// The marks a constructor leaves beside shape and type: ggml_set_input,
// external buffers and weights, the unary function a backend fuses by,
// and ggml_scale_inplace's placement as a node.
func TestTensorMarks(t *testing.T) {
	var c Ctx
	in := c.Input("in", gguf.TypeI32, 7)
	if !in.input || in.external || in.cls != leaf || in.op != None || in.bytes != 28 || in.Name != "in" {
		t.Errorf("input: %+v", in)
	}
	// An external tensor is sized by its shape until SetWeight gives its
	// size in its buffer (a quantized weight's, say).
	w := c.External("blk.0.w", gguf.TypeQ8_0, "GPU0", 64, 10)
	if w.Home() != "GPU0" || !w.external || w.isWeight || !w.cache() || w.bytes != 10*68 {
		t.Errorf("external: home %q weight %v cache %v %d bytes, want GPU0, a cache of 680", w.Home(), w.isWeight, w.cache(), w.bytes)
	}
	w.SetWeight(1000)
	if !w.isWeight || w.cache() || w.bytes != 1000 {
		t.Errorf("SetWeight: weight %v cache %v %d bytes", w.isWeight, w.cache(), w.bytes)
	}
	if s := c.UnaryOf(UnarySiLU, c.Input("g", gguf.TypeF32, 8)); s.unary != UnarySiLU || s.op != Unary {
		t.Errorf("UnaryOf: %d %d", s.op, s.unary)
	}
	if s := c.Unary(in); s.unary != UnaryOther {
		t.Errorf("Unary: %d", s.unary)
	}
	if s := c.ScaleInplace(in); !s.inplaceOp || s.plainView() {
		t.Errorf("scale_inplace: inplaceOp %v, plain view %v; the scheduler places it", s.inplaceOp, s.plainView())
	}
	if s := c.Clamp(in); !s.inplaceOp || s.plainView() {
		t.Errorf("clamp: inplaceOp %v, plain view %v; the scheduler places it", s.inplaceOp, s.plainView())
	}
	if o := c.Norm(in).SetOutput(); !o.output {
		t.Error("SetOutput did not mark")
	}
	// Elems counts a dimension of 0 as 1.
	if n := Elems([4]int64{3, 0, 2, 0}); n != 6 {
		t.Errorf("Elems = %d, want 6", n)
	}
}

// Which ops ggml-alloc may run in place (ggml_op_can_inplace in 80fb11a's
// ggml/src/ggml-alloc.c, which lists CLAMP and FILL too), and which are
// view ops (ggml_is_view_op).
func TestOpClasses(t *testing.T) {
	in := []Op{Scale, Add, AddID, Sub, Mul, Div, Sqr, Sqrt, Clamp, Unary, Rope, RMSNorm, SoftMax, Fill}
	views := []Op{View, Reshape, Permute, Transpose}
	for op := None; op <= Fill; op++ {
		if got, want := op.canInplace(), slices.Contains(in, op); got != want {
			t.Errorf("op %d: canInplace %v, want %v", op, got, want)
		}
		if got, want := op.isView(), slices.Contains(views, op); got != want {
			t.Errorf("op %d: isView %v, want %v", op, got, want)
		}
		if got, want := op.empty(), op == None || slices.Contains(views, op); got != want {
			t.Errorf("op %d: empty %v, want %v", op, got, want)
		}
	}
}

// ggml_visit_parents records a tensor's sources first, in source order,
// leafs apart from nodes, each once; the use counts are the times each
// tensor is a source of a recorded node.
func TestExpandOrder(t *testing.T) {
	var c Ctx
	w := c.External("w", gguf.TypeF32, "CPU", 64, 64)
	x := c.Input("x", gguf.TypeF32, 64, 4)
	b := c.Input("b", gguf.TypeF32, 64)
	mm := c.MulMat(w, x)
	add := c.Add(mm, x)
	out := c.Mul(add, c.Add(b, b))
	c.Expand(out)
	c.Expand(out) // a second expand records nothing
	if !slices.Equal(c.G.Leafs(), []*Tensor{w, x, b}) {
		t.Errorf("leafs %v, want w x b", names(c.G.Leafs()))
	}
	bb := out.src[1]
	if !slices.Equal(c.G.Nodes(), []*Tensor{mm, add, bb, out}) {
		t.Errorf("%d nodes, want mm, add, b+b, out", len(c.G.Nodes()))
	}
	// x is read by mm and add; b twice by the same ADD; w once.
	for _, u := range []struct {
		t    *Tensor
		want int32
	}{{w, 1}, {x, 2}, {b, 2}, {mm, 1}, {add, 1}, {bb, 1}, {out, 0}} {
		if u.t.uses != u.want {
			t.Errorf("%v used %d times, want %d", names([]*Tensor{u.t}), u.t.uses, u.want)
		}
	}
	// set_rows records its rows and indices before the destination, and
	// the reshape of the cache it writes through after them.
	var c2 Ctx
	cache := c2.External("cache", gguf.TypeF16, "CPU", 64, 100)
	rows := c2.Norm(c2.Input("r", gguf.TypeF32, 64, 4))
	idx := c2.Input("idx", gguf.TypeI64, 4)
	dst := c2.Reshape(cache, 64, 100)
	s := c2.SetRows(dst, rows, idx)
	c2.Expand(s)
	if !slices.Equal(c2.G.Nodes(), []*Tensor{rows, dst, s}) || s.view != cache {
		t.Errorf("set_rows nodes %d, owner %v", len(c2.G.Nodes()), names([]*Tensor{s.view}))
	}
}
