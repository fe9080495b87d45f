package plan

import (
	"strconv"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
)

// This file describes llama.cpp's graphs for deepseek2 (src/models/
// deepseek2.cpp: multi-head latent attention in its absorbed form, where
// the cache holds the compressed latent and the rope part of K) and
// glm4moe (src/models/glm4-moe.cpp: biased Q/K/V, a post-attention norm,
// sigmoid-routed experts with a selection bias), both with the MoE FFN of
// llm_graph_context::build_moe_ffn and shared experts. Every tensor below
// is one ggml creates, with ggml's type and shape; the sources are listed
// in ggml's order, because ggml_build_forward_expand records a node after
// its sources, depth first, and that order decides what the allocator can
// reuse.

// mlaBuilder returns the graph builder for deepseek2 (multi-head latent attention) and glm4moe; nil for a model it does not describe.
func mlaBuilder(m *arch.Model) graphBuilder {
	s := mlaShapes(tensorShapes(m))
	switch m.Arch {
	case "deepseek2":
		if d, ok := mlaDeepseek2Dims(m, s); ok {
			return func(m *arch.Model, c Context, nTokens int, b *gb) *graph {
				return mlaDeepseek2Graph(m, d, c, nTokens, b)
			}
		}
	case "glm4moe":
		if mlaGLMSupported(m, s) {
			return mlaGLM4MoEGraph
		}
	}
	return nil
}

// mlaShapes are the model's tensor shapes by name.
type mlaShapes map[string][]uint64

// dim is the i-th dimension of a tensor, 0 when the tensor or the
// dimension is absent.
func (s mlaShapes) dim(name string, i int) int64 {
	sh, ok := s[name]
	if !ok || i >= len(sh) {
		return 0
	}
	return int64(sh[i])
}

func (s mlaShapes) has(name string) bool {
	_, ok := s[name]
	return ok
}

func mlaBlk(il int) string { return "blk." + strconv.Itoa(il) + "." }

// mlaGraphLayers is the number of blocks the graph runs: llama.cpp's
// n_layer, which leaves out the trailing NextN (multi-token prediction)
// blocks whose weights the loader skips.
func mlaGraphLayers(m *arch.Model) int {
	skipped := make([]bool, m.NLayer)
	for _, t := range m.Tensors {
		if t.Unused && t.Layer >= 0 && t.Layer < m.NLayer {
			skipped[t.Layer] = true
		}
	}
	n := m.NLayer
	for n > 0 && skipped[n-1] {
		n--
	}
	return n
}

// mlaFFN describes one layer's feed-forward block, read from its tensors.
type mlaFFN struct {
	moe       bool
	ff        int64 // dense width
	ffExp     int64 // each routed expert's width
	ffShexp   int64 // the shared experts' width (0: none)
	probsBias bool  // exp_probs_b, the selection bias
}

// mlaFFNOf reads layer il's FFN; ok is false for a layout this file does
// not describe (merged gate_up experts, a missing tensor).
func mlaFFNOf(m *arch.Model, s mlaShapes, il int) (mlaFFN, bool) {
	p := mlaBlk(il)
	var f mlaFFN
	embd := int64(m.NEmbd)
	if !s.has(p + "ffn_gate_inp.weight") {
		f.ff = s.dim(p+"ffn_up.weight", 1)
		ok := f.ff > 0 && s.dim(p+"ffn_gate.weight", 1) == f.ff && s.dim(p+"ffn_down.weight", 0) == f.ff
		return f, ok
	}
	f.moe = true
	nExp := int64(m.NExpert)
	f.ffExp = s.dim(p+"ffn_up_exps.weight", 1)
	if f.ffExp == 0 || m.NExpertUsed <= 0 || nExp <= 0 ||
		s.dim(p+"ffn_gate_exps.weight", 1) != f.ffExp || s.dim(p+"ffn_down_exps.weight", 0) != f.ffExp ||
		s.dim(p+"ffn_up_exps.weight", 2) != nExp || s.dim(p+"ffn_gate_inp.weight", 1) != nExp ||
		s.dim(p+"ffn_gate_inp.weight", 0) != embd {
		return f, false
	}
	if s.has(p + "ffn_up_shexp.weight") {
		f.ffShexp = s.dim(p+"ffn_up_shexp.weight", 1)
		if f.ffShexp == 0 || s.dim(p+"ffn_gate_shexp.weight", 1) != f.ffShexp || s.dim(p+"ffn_down_shexp.weight", 0) != f.ffShexp {
			return f, false
		}
	}
	f.probsBias = s.has(p + "exp_probs_b.bias")
	return f, true
}

// mlaTensor makes a tensor of type t (trailing zeros in ne mean 1).
func (b *gb) mlaTensor(name string, t gguf.GGMLType, op gop, ne [4]int64, src ...*gtensor) *gtensor {
	return b.tensor(name, t, op, ne, src...)
}

// mlaView is a view (reshape, permute, transpose, slice) that keeps the
// viewed tensor's element type, so that a copy of it to another backend
// has the right size.
func (b *gb) mlaView(name string, v *gtensor, ne [4]int64) *gtensor {
	t := b.view(name, v, ne)
	t.layout.typ = v.layout.typ
	return t
}

// mlaCache is a layer's K or V cache tensor, of the cache's element type,
// on the layer's KV device.
func (b *gb) mlaCache(il int, name string, t gguf.GGMLType, ne [4]int64) *gtensor {
	c := b.tensor(name, t, opNone, ne)
	c.external = true
	c.home = b.cpu
	if il < len(b.kvDev) {
		c.home = b.kvDev[il]
	}
	return c
}

// mlaNorm is build_norm with LLM_NORM_RMS and a weight: rms_norm, then
// the weight's mul, both of which may run in place.
func (b *gb) mlaNorm(x *gtensor, w string) *gtensor {
	ne := x.layout.ne
	n := b.f32("norm", opInplace, ne, x)
	return b.f32(w, opInplace, ne, n, b.weight(w, [4]int64{ne[0]}))
}

// mlaMatMul is ggml_mul_mat(w, x) with a weight w of rows×cols: F32
// [rows, x.ne1, x.ne2, x.ne3].
func (b *gb) mlaMatMul(name, w string, cols, rows int64, x *gtensor) *gtensor {
	ne := x.layout.ne
	return b.f32(name, opOther, [4]int64{rows, ne[1], ne[2], ne[3]}, b.weight(w, [4]int64{cols, rows}), x)
}

// mlaFFNDense is build_ffn with SiLU and parallel gate: up, gate,
// swiglu_split(gate, up) (a GLU, never in place) and down.
func (b *gb) mlaFFNDense(p, suffix string, x *gtensor, embd, ff int64) *gtensor {
	T := x.layout.ne[1]
	up := b.mlaMatMul("ffn_up"+suffix, p+"ffn_up"+suffix+".weight", embd, ff, x)
	gate := b.mlaMatMul("ffn_gate"+suffix, p+"ffn_gate"+suffix+".weight", embd, ff, x)
	act := b.f32("ffn_swiglu"+suffix, opOther, [4]int64{ff, T}, gate, up)
	return b.mlaMatMul("ffn_down"+suffix, p+"ffn_down"+suffix+".weight", ff, embd, act)
}

// mlaMoE is build_moe_ffn for SiLU experts with separate gate and up,
// softmax or sigmoid routing, an optional selection bias, and no weight
// normalization or scaling (expert_weights_norm false, scale 0 or 1, as
// the modelled files have): router logits, probabilities (in place),
// argsort and its top-k view, get_rows of the probabilities, the three
// mul_mat_id with [n_ff_exp, n_expert_used, n_tokens] intermediates, the
// weighting (in place) and the sum over experts of views of the result.
func (b *gb) mlaMoE(p string, x *gtensor, embd, nExp, nUsed int64, f mlaFFN) *gtensor {
	T := x.layout.ne[1]
	logits := b.mlaMatMul("ffn_moe_logits", p+"ffn_gate_inp.weight", embd, nExp, x)
	probs := b.f32("ffn_moe_probs", opInplace, logits.layout.ne, logits)
	sel := probs
	if f.probsBias {
		sel = b.f32("ffn_moe_probs_biased", opInplace, probs.layout.ne, probs, b.weight(p+"exp_probs_b.bias", [4]int64{nExp}))
	}
	argsort := b.mlaTensor("ffn_moe_argsort", gguf.TypeI32, opOther, [4]int64{nExp, T}, sel)
	topk := b.mlaView("ffn_moe_topk", argsort, [4]int64{nUsed, T})
	probs3 := b.mlaView("ffn_moe_probs_3d", probs, [4]int64{1, nExp, T})
	weights := b.f32("ffn_moe_weights", opOther, [4]int64{1, nUsed, T}, probs3, topk)
	// build_moe_ffn expands the weights early, so that the top-k
	// selection can be fused.
	b.g.expand(weights)
	x3 := b.mlaView("ffn_moe_in_3d", x, [4]int64{embd, 1, T})
	mmid := func(name, w string, cols, rows int64, in *gtensor) *gtensor {
		wt := b.weight(w, [4]int64{cols, rows, nExp})
		return b.f32(name, opOther, [4]int64{rows, nUsed, T}, wt, in, topk)
	}
	up := mmid("ffn_moe_up", p+"ffn_up_exps.weight", embd, f.ffExp, x3)
	gate := mmid("ffn_moe_gate", p+"ffn_gate_exps.weight", embd, f.ffExp, x3)
	act := b.f32("ffn_moe_swiglu", opOther, [4]int64{f.ffExp, nUsed, T}, gate, up)
	down := mmid("ffn_moe_down", p+"ffn_down_exps.weight", f.ffExp, embd, act)
	experts := b.f32("ffn_moe_weighted", opInplace, down.layout.ne, down, weights)
	b.g.expand(experts)
	views := make([]*gtensor, nUsed)
	for i := range views {
		views[i] = b.mlaView("ffn_moe_expert", experts, [4]int64{embd, T})
		b.g.expand(views[i])
	}
	out := views[0]
	for _, v := range views[1:] {
		out = b.f32("ffn_moe_sum", opInplace, [4]int64{embd, T}, out, v)
		b.g.expand(out)
	}
	if nUsed == 1 {
		out = b.f32("ffn_moe_cont", opOther, [4]int64{embd, T}, out)
	}
	return out
}

// mlaFFNBlock is a layer's FFN: dense, or routed experts plus the shared
// experts' FFN, added.
func (b *gb) mlaFFNBlock(m *arch.Model, p string, x *gtensor, f mlaFFN) *gtensor {
	embd := int64(m.NEmbd)
	if !f.moe {
		return b.mlaFFNDense(p, "", x, embd, f.ff)
	}
	out := b.mlaMoE(p, x, embd, int64(m.NExpert), int64(m.NExpertUsed), f)
	if f.ffShexp > 0 {
		sh := b.mlaFFNDense(p, "_shexp", x, embd, f.ffShexp)
		out = b.f32("ffn_out", opInplace, out.layout.ne, out, sh)
	}
	return out
}

// mlaInputs are the graph inputs every layer reads.
type mlaInputs struct {
	pos, kIdx, vIdx, mask, outIDs *gtensor
	// kRot and vRot rotate a quantized cache's rows (nil otherwise, and
	// always for MLA's latent cache).
	kRot, vRot *gtensor
}

// mlaPrelude records the token embedding (build_inp_embd, both of its
// inputs) and makes the attention inputs in llama.cpp's order; withV
// says whether the cache has a V part (it has none with MLA), nOut is the
// number of output rows.
func (b *gb) mlaPrelude(m *arch.Model, c Context, T, nOut int64, withV bool) (*gtensor, mlaInputs) {
	embd := int64(m.NEmbd)
	tokens := b.input("inp_tokens", gguf.TypeI32, [4]int64{T})
	tokEmbd := b.weight("token_embd.weight", [4]int64{embd, int64(m.NVocab)})
	vecEmbd := b.input("inp_embd", gguf.TypeF32, [4]int64{embd, T})
	inpL := b.f32("embd", opOther, [4]int64{embd, T}, tokEmbd, tokens)
	inpL.gather = true
	b.g.expand(inpL)
	b.g.expand(vecEmbd)
	var in mlaInputs
	in.pos = b.input("inp_pos", gguf.TypeI32, [4]int64{T})
	in.kIdx = b.input("k_idxs", gguf.TypeI64, [4]int64{T})
	if withV {
		n := T
		if c.VTrans {
			n = T * int64(maxVDim(m))
		}
		in.vIdx = b.input("v_idxs", gguf.TypeI64, [4]int64{n})
	}
	maskType := gguf.TypeF32
	if c.Flash {
		maskType = gguf.TypeF16 // flash attention requires an F16 mask
	}
	streams := int64(c.NStream)
	in.mask = b.input("kq_mask", maskType, [4]int64{int64(c.NCtxSeq), T / streams, 1, streams})
	in.outIDs = b.input("inp_out_ids", gguf.TypeI32, [4]int64{nOut})
	// Only the KV-cache inputs have rotations: MLA's K-only cache input
	// (build_attn_inp_k) makes none, whatever the cache's type.
	quant := func(t gguf.GGMLType) bool { i, _ := t.Info(); return i.Quantized }
	hk, hv := uniformHeads(m)
	if withV && quant(c.TypeK) && hk > 0 && hk%64 == 0 {
		n := swaRotSize(hk)
		in.kRot = b.input("k_rot", gguf.TypeF32, [4]int64{n, n})
	}
	if withV && quant(c.TypeV) && hv > 0 && hv%64 == 0 {
		in.vRot = b.input("v_rot", gguf.TypeF32, [4]int64{64, 64})
	}
	return inpL, in
}

// mlaCacheRows is the cache as ggml_set_rows writes it: with several
// streams cpy_k and cpy_v merge them with a reshape (the indices are
// global).
func (b *gb) mlaCacheRows(cache *gtensor, streams int64) *gtensor {
	if streams <= 1 {
		return cache
	}
	ne := cache.layout.ne
	return b.mlaView("cache_merged", cache, [4]int64{ne[0], ne[1] * streams})
}

// mlaOutput is the last norm and the output projection.
func (b *gb) mlaOutput(m *arch.Model, inpL *gtensor) *graph {
	embd := int64(m.NEmbd)
	cur := b.mlaNorm(inpL, "output_norm.weight")
	cur.output = true
	logits := b.mlaMatMul("result_output", "output.weight", embd, int64(m.NVocab), cur)
	logits.output = true
	b.g.expand(logits)
	return &b.g
}

// mlaGLMSupported checks that the model is the glm4moe this file
// describes: full attention with separate Q, K and V projections in every
// run layer, and FFNs it can read.
func mlaGLMSupported(m *arch.Model, s mlaShapes) bool {
	n := mlaGraphLayers(m)
	if m.MLA || n == 0 || m.NHead <= 0 {
		return false
	}
	embd := int64(m.NEmbd)
	for il := 0; il < n; il++ {
		l := m.Layers[il]
		if l.Attention != arch.Full || l.Recurrent || l.HeadsKV <= 0 || l.KDim != l.VDim || l.KDim%l.HeadsKV != 0 {
			return false
		}
		p := mlaBlk(il)
		headDim := int64(l.KDim / l.HeadsKV)
		if s.dim(p+"attn_q.weight", 1) != int64(m.NHead)*headDim || s.dim(p+"attn_k.weight", 1) != int64(l.KDim) ||
			s.dim(p+"attn_v.weight", 1) != int64(l.VDim) || s.dim(p+"attn_output.weight", 1) != embd ||
			!s.has(p+"post_attention_norm.weight") {
			return false
		}
		if s.has(p+"attn_q_norm.weight") != s.has(p+"attn_k_norm.weight") {
			return false
		}
		if _, ok := mlaFFNOf(m, s, il); !ok {
			return false
		}
	}
	return true
}

// mlaGLM4MoEGraph is src/models/glm4-moe.cpp: llama-style attention with
// biased projections (and Q/K norms when present), a post-attention norm
// before the FFN, dense leading layers and routed plus shared experts;
// the NextN block at the end is not run.
func mlaGLM4MoEGraph(m *arch.Model, c Context, nTokens int, b *gb) *graph {
	b.init(m)
	s := mlaShapes(b.shapes)
	T, nOut := reserveTokens(c, nTokens)
	nKV := int64(c.NCtxSeq)
	streams := int64(c.NStream)
	embd := int64(m.NEmbd)
	H := int64(m.NHead)
	layers := mlaGraphLayers(m)
	inpL, in := b.mlaPrelude(m, c, T, nOut, true)
	for il := 0; il < layers; il++ {
		l := m.Layers[il]
		p := mlaBlk(il)
		hKV := int64(l.HeadsKV)
		hd := int64(l.KDim) / hKV
		inpSA := inpL
		cur := b.mlaNorm(inpL, p+"attn_norm.weight")
		proj := func(name string, rows int64) *gtensor {
			x := b.mlaMatMul(name, p+"attn_"+name+".weight", embd, rows, cur)
			if b.has(p + "attn_" + name + ".bias") {
				x = b.f32(name+"_b", opInplace, x.layout.ne, x, b.weight(p+"attn_"+name+".bias", [4]int64{rows}))
			}
			return x
		}
		q := b.mlaView("Qcur_3d", proj("q", H*hd), [4]int64{hd, H, T})
		k := b.mlaView("Kcur_3d", proj("k", hKV*hd), [4]int64{hd, hKV, T})
		v := b.mlaView("Vcur_3d", proj("v", hKV*hd), [4]int64{hd, hKV, T})
		if b.has(p + "attn_q_norm.weight") {
			q = b.mlaNorm(q, p+"attn_q_norm.weight")
			k = b.mlaNorm(k, p+"attn_k_norm.weight")
		}
		q = b.f32("Qcur_rope", opInplace, q.layout.ne, q, in.pos)
		k = b.f32("Kcur_rope", opInplace, k.layout.ne, k, in.pos)
		if in.kRot != nil {
			q = b.swaRotate(q, in.kRot, false)
			k = b.swaRotate(k, in.kRot, false)
		}
		if in.vRot != nil {
			v = b.swaRotate(v, in.vRot, false)
		}
		b.g.expand(q)
		b.g.expand(v)
		b.g.expand(k)
		cur = b.kvAttention(il, c, attnShape{H, hKV, hd, hd, nKV, streams, T}, q, k, v, in.kIdx, in.vIdx, in.mask, nil)
		if in.vRot != nil {
			cur = b.swaRotate(cur, in.vRot, false)
		}
		cur = b.mlaMatMul("attn_out", p+"attn_output.weight", H*hd, embd, cur)
		rows := T
		if il == layers-1 {
			rows = nOut
			cur = b.f32("get_rows_cur", opOther, [4]int64{embd, rows}, cur, in.outIDs)
			inpSA = b.f32("get_rows_inp", opOther, [4]int64{embd, rows}, inpSA, in.outIDs)
		}
		ffnInp := b.f32("ffn_inp", opInplace, [4]int64{embd, rows}, cur, inpSA)
		cur = b.mlaNorm(ffnInp, p+"post_attention_norm.weight")
		f, _ := mlaFFNOf(m, s, il)
		cur = b.mlaFFNBlock(m, p, cur, f)
		inpL = b.f32("l_out", opInplace, [4]int64{embd, rows}, cur, ffnInp)
	}
	return b.mlaOutput(m, inpL)
}
