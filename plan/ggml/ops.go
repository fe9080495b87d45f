package ggml

import "github.com/headroom-llm/headroom/gguf"

// The op constructors below mirror ggml's (ggml.c): each gives its
// result ggml's type and shape, lists its sources in ggml's order (which
// decides the order ggml_visit_parents records them in) and takes its
// allocation class from its op.

func (c *Ctx) op(t gguf.GGMLType, op Op, ne [4]int64, src ...*Tensor) *Tensor {
	cls := other
	if op.canInplace() {
		cls = inplace
	}
	return c.newTensor(t, op, cls, ne, src...)
}

// f32 is a result of op that ggml makes F32 whatever its sources' types
// (ggml_new_tensor with GGML_TYPE_F32): matrix products, attention, the
// state-space scans. Ops that ggml gives their first source's type take
// it from a instead.
func (c *Ctx) f32(op Op, ne [4]int64, src ...*Tensor) *Tensor {
	return c.op(gguf.TypeF32, op, ne, src...)
}

// viewOf makes a tensor that uses v's memory: a view op, or an op that
// writes into v. Like ggml, it points at the owner of the memory, and v
// (or the given sources) come first among its sources, so that v's last
// use is counted through it.
func (c *Ctx) viewOf(op Op, v *Tensor, t gguf.GGMLType, ne [4]int64, src ...*Tensor) *Tensor {
	if len(src) == 0 {
		src = []*Tensor{v}
	}
	x := c.newTensor(t, op, view, ne, src...)
	x.view, x.bytes = v.owner(), 0
	return x
}

// View is ggml_view_1d..4d: a window of ne into a.
func (c *Ctx) View(a *Tensor, ne ...int64) *Tensor {
	return c.viewOf(View, a, a.layout.typ, shape(ne))
}

// Reshape is ggml_reshape_1d..4d.
func (c *Ctx) Reshape(a *Tensor, ne ...int64) *Tensor {
	return c.viewOf(Reshape, a, a.layout.typ, shape(ne))
}

// Permute is ggml_permute: dimension i of a becomes dimension axes[i].
func (c *Ctx) Permute(a *Tensor, axes ...int) *Tensor {
	ne := a.layout.ne
	for i, ax := range axes {
		ne[ax] = a.layout.ne[i]
	}
	return c.viewOf(Permute, a, a.layout.typ, ne)
}

// Transpose is ggml_transpose: the first two dimensions swapped.
func (c *Ctx) Transpose(a *Tensor) *Tensor {
	ne := a.layout.ne
	ne[0], ne[1] = ne[1], ne[0]
	return c.viewOf(Transpose, a, a.layout.typ, ne)
}

// Cont is ggml_cont (ggml_cont_Nd with a new shape): a contiguous copy.
func (c *Ctx) Cont(a *Tensor, ne ...int64) *Tensor {
	s := a.layout.ne
	if len(ne) > 0 {
		s = shape(ne)
	}
	return c.op(a.layout.typ, Cont, s, a)
}

// Cast is ggml_cast(a, t): a copied into a new tensor of type t (a CPY
// whose destination is its own result).
func (c *Ctx) Cast(a *Tensor, t gguf.GGMLType) *Tensor {
	return c.op(t, Cpy, a.layout.ne, a)
}

// Cpy is ggml_cpy(a, b): a written into b, a view of b.
func (c *Ctx) Cpy(a, b *Tensor) *Tensor {
	return c.viewOf(Cpy, b, b.layout.typ, b.layout.ne, a, b)
}

// GetRows is ggml_get_rows(a, rows): the rows of a that rows selects,
// in F32 (ggml dequantizes them) unless a is an I32 table, whose rows
// keep their type.
func (c *Ctx) GetRows(a, rows *Tensor) *Tensor {
	r := rows.layout.ne
	t := gguf.TypeF32
	if a.layout.typ == gguf.TypeI32 {
		t = gguf.TypeI32
	}
	return c.op(t, GetRows, [4]int64{a.layout.ne[0], r[0], r[1], r[2]}, a, rows)
}

// SetRows is ggml_set_rows(dst, rows, idx): rows written into dst at idx,
// a view of dst. The destination is a last source here so that the rows
// and indices are recorded before a reshape of it.
func (c *Ctx) SetRows(dst, rows, idx *Tensor) *Tensor {
	return c.viewOf(SetRows, dst, dst.layout.typ, dst.layout.ne, rows, idx, dst)
}

// MulMat is ggml_mul_mat(a, b): {a.ne1, b.ne1, b.ne2, b.ne3}.
func (c *Ctx) MulMat(a, b *Tensor) *Tensor {
	return c.f32(MulMat, [4]int64{a.layout.ne[1], b.layout.ne[1], b.layout.ne[2], b.layout.ne[3]}, a, b)
}

// MulMatID is ggml_mul_mat_id(as, b, ids): the experts ids selects, for
// each token: {as.ne1, ids.ne0, b.ne2}.
func (c *Ctx) MulMatID(as, b, ids *Tensor) *Tensor {
	return c.f32(MulMatID, shape([]int64{as.layout.ne[1], ids.layout.ne[0], b.layout.ne[2]}), as, b, ids)
}

// binary is an element-wise op of a and b (broadcast) of a's shape.
func (c *Ctx) binary(op Op, a, b *Tensor) *Tensor { return c.op(a.layout.typ, op, a.layout.ne, a, b) }

// Add is ggml_add.
func (c *Ctx) Add(a, b *Tensor) *Tensor { return c.binary(Add, a, b) }

// Sub is ggml_sub.
func (c *Ctx) Sub(a, b *Tensor) *Tensor { return c.binary(Sub, a, b) }

// Mul is ggml_mul.
func (c *Ctx) Mul(a, b *Tensor) *Tensor { return c.binary(Mul, a, b) }

// Div is ggml_div.
func (c *Ctx) Div(a, b *Tensor) *Tensor { return c.binary(Div, a, b) }

// AddID is ggml_add_id(a, b, ids): one row of b per selected expert.
func (c *Ctx) AddID(a, b, ids *Tensor) *Tensor {
	return c.op(a.layout.typ, AddID, a.layout.ne, a, b, ids)
}

// unary is an op on a alone, of a's shape.
func (c *Ctx) unary(op Op, a *Tensor) *Tensor { return c.op(a.layout.typ, op, a.layout.ne, a) }

// Scale is ggml_scale (and ggml_scale_bias).
func (c *Ctx) Scale(a *Tensor) *Tensor { return c.unary(Scale, a) }

// ScaleInplace is ggml_scale_inplace: a view of a that the scheduler
// still places as a node.
func (c *Ctx) ScaleInplace(a *Tensor) *Tensor {
	x := c.viewOf(Scale, a, a.layout.typ, a.layout.ne)
	x.inplaceOp = true
	return x
}

// Sqr is ggml_sqr.
func (c *Ctx) Sqr(a *Tensor) *Tensor { return c.unary(Sqr, a) }

// Sqrt is ggml_sqrt.
func (c *Ctx) Sqrt(a *Tensor) *Tensor { return c.unary(Sqrt, a) }

// Clamp is ggml_clamp, which clamps a where it lies (ggml_view_tensor):
// the allocator never gives it memory of its own, even where a has other
// readers, while the scheduler places it like any op.
func (c *Ctx) Clamp(a *Tensor) *Tensor {
	x := c.viewOf(Clamp, a, a.layout.typ, a.layout.ne)
	x.inplaceOp = true
	return x
}

// Unary is ggml_unary: silu, sigmoid, tanh, relu, gelu, softplus, exp...
func (c *Ctx) Unary(a *Tensor) *Tensor { return c.unary(Unary, a) }

// UnaryOf is ggml_unary with the function named, where a backend treats
// it apart (Vulkan fuses GELU, SIGMOID, SILU and SOFTPLUS with a MUL
// that reads them).
func (c *Ctx) UnaryOf(f UnaryFunc, a *Tensor) *Tensor {
	t := c.unary(Unary, a)
	t.unary = f
	return t
}

// RMSNorm is ggml_rms_norm.
func (c *Ctx) RMSNorm(a *Tensor) *Tensor { return c.unary(RMSNorm, a) }

// Norm is ggml_norm (layer norm), which never runs in place.
func (c *Ctx) Norm(a *Tensor) *Tensor { return c.unary(Norm, a) }

// L2Norm is ggml_l2_norm.
func (c *Ctx) L2Norm(a *Tensor) *Tensor { return c.unary(L2Norm, a) }

// rows is a's shape with one element per row.
func rows(a *Tensor) [4]int64 {
	ne := a.layout.ne
	ne[0] = 1
	return ne
}

// SumRows is ggml_sum_rows.
func (c *Ctx) SumRows(a *Tensor) *Tensor { return c.op(a.layout.typ, SumRows, rows(a), a) }

// Mean is ggml_mean: each row's mean, in F32 whatever a's type (unlike
// SumRows).
func (c *Ctx) Mean(a *Tensor) *Tensor { return c.f32(Mean, rows(a), a) }

// Repeat is ggml_repeat_4d: a tiled to ne.
func (c *Ctx) Repeat(a *Tensor, ne ...int64) *Tensor {
	return c.op(a.layout.typ, Repeat, shape(ne), a)
}

// Pad is ggml_pad: a padded with zeros to ne.
func (c *Ctx) Pad(a *Tensor, ne ...int64) *Tensor { return c.op(a.layout.typ, Pad, shape(ne), a) }

// Concat is ggml_concat(a, b, dim).
func (c *Ctx) Concat(a, b *Tensor, dim int) *Tensor {
	ne := a.layout.ne
	ne[dim] += b.layout.ne[dim]
	return c.op(a.layout.typ, Concat, ne, a, b)
}

// Argsort is ggml_argsort: I32 indices of a's shape.
func (c *Ctx) Argsort(a *Tensor) *Tensor { return c.op(gguf.TypeI32, Argsort, a.layout.ne, a) }

// Rope is ggml_rope_ext(a, pos, freqs); freqs may be nil.
func (c *Ctx) Rope(a, pos, freqs *Tensor) *Tensor {
	if freqs == nil {
		return c.op(a.layout.typ, Rope, a.layout.ne, a, pos)
	}
	return c.op(a.layout.typ, Rope, a.layout.ne, a, pos, freqs)
}

// SoftMax is ggml_soft_max_ext(a, mask) with the sinks
// (ggml_soft_max_add_sinks) as a last source; mask and sinks may be nil.
func (c *Ctx) SoftMax(a, mask, sinks *Tensor) *Tensor {
	src := []*Tensor{a, mask, sinks}
	n := 1
	for _, s := range src[1:] {
		if s != nil {
			src[n] = s
			n++
		}
	}
	return c.op(a.layout.typ, SoftMax, a.layout.ne, src[:n]...)
}

// FlashAttnExt is ggml_flash_attn_ext(q, k, v, mask) with the sinks as a
// last source when not nil: {v.ne0, q.ne2, q.ne1, q.ne3}. The mask may be
// nil (clip's encoders attend to every patch).
func (c *Ctx) FlashAttnExt(q, k, v, mask, sinks *Tensor) *Tensor {
	ne := [4]int64{v.layout.ne[0], q.layout.ne[2], q.layout.ne[1], q.layout.ne[3]}
	src := []*Tensor{q, k, v, mask, sinks}
	n := 3
	for _, s := range src[3:] {
		if s != nil {
			src[n] = s
			n++
		}
	}
	return c.f32(FlashAttnExt, ne, src[:n]...)
}

// GLU is ggml_glu_split(a, b) (swiglu, geglu): a's shape.
func (c *Ctx) GLU(a, b *Tensor) *Tensor { return c.op(a.layout.typ, GLU, a.layout.ne, a, b) }

// GLUFused is ggml_glu on one tensor holding the gate and the value side
// by side: half of a's rows.
func (c *Ctx) GLUFused(a *Tensor) *Tensor {
	ne := a.layout.ne
	ne[0] /= 2
	return c.op(a.layout.typ, GLU, ne, a)
}

// SSMConv is ggml_ssm_conv(sx, w): {d_inner, n_seq_tokens, n_seqs}.
func (c *Ctx) SSMConv(sx, w *Tensor) *Tensor {
	return c.f32(SSMConv, shape([]int64{sx.layout.ne[1], sx.layout.ne[0] - w.layout.ne[0] + 1, sx.layout.ne[2]}), sx, w)
}

// SSMScan is ggml_ssm_scan(s, x, dt, A, B, C, ids): the output rows and
// the final states of the selected sequences, in one F32 tensor.
func (c *Ctx) SSMScan(s, x, dt, A, B, C, ids *Tensor) *Tensor {
	sn := s.layout.ne
	n := Elems(x.layout.ne) + sn[0]*sn[1]*sn[2]*ids.layout.ne[0]
	return c.f32(SSMScan, shape([]int64{n}), s, x, dt, A, B, C, ids)
}

// Fill is ggml_fill(a, c): a tensor of a's shape and type holding c
// (DeepSeek V3's mask over the expert groups it does not keep).
func (c *Ctx) Fill(a *Tensor) *Tensor { return c.unary(Fill, a) }

// GatedDeltaNet is ggml_gated_delta_net(q, k, v, g, beta, state, K): the
// output rows and then K snapshots of the new states (one, or 1 +
// n_rs_seq where drafts are rolled back), {S_v*H_v, n_tokens*n_seqs +
// K*S_v*n_seqs}.
func (c *Ctx) GatedDeltaNet(q, k, v, g, beta, state *Tensor, snapshots int64) *Tensor {
	ne := v.layout.ne
	return c.f32(GatedDeltaNet, shape([]int64{ne[0] * ne[1], ne[2]*ne[3] + snapshots*ne[0]*ne[3]}), q, k, v, g, beta, state)
}

// Im2Col is ggml_im2col(a, b, s0, s1, 0, 0, 1, 1, true, t): the patches
// of image b under kernel a, unpadded and undilated, one row of
// a.ne0*a.ne1*a.ne2 values per output position, in type t:
// {IC*KH*KW, OW, OH, N}.
func (c *Ctx) Im2Col(a, b *Tensor, s0, s1 int64, t gguf.GGMLType) *Tensor {
	ka, nb := a.layout.ne, b.layout.ne
	ow := (nb[0]-ka[0])/s0 + 1
	oh := (nb[1]-ka[1])/s1 + 1
	return c.op(t, Im2Col, [4]int64{ka[0] * ka[1] * ka[2], ow, oh, nb[3]}, a, b)
}

// Pool2D is ggml_pool_2d(a, op, k0, k1, s0, s1, 0, 0): F32 whatever a's
// type, {(ne0-k0)/s0+1, (ne1-k1)/s1+1, ne2, ne3}.
func (c *Ctx) Pool2D(a *Tensor, k0, k1, s0, s1 int64) *Tensor {
	ne := a.layout.ne
	ne[0] = (ne[0]-k0)/s0 + 1
	ne[1] = (ne[1]-k1)/s1 + 1
	return c.f32(Pool2D, ne, a)
}
