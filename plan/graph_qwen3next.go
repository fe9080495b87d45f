package plan

import (
	"strconv"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
)

// This file describes the graph llama.cpp builds for Qwen3-Next
// (src/models/qwen3next.cpp on llm_build_delta_net_base): three layers of
// four run gated DeltaNet, a linear attention whose per-sequence state
// lives in the rs buffer, the fourth gated softmax attention on the KV
// cache; every layer ends in routed experts plus a sigmoid-gated shared
// expert. The DeltaNet recurrence is one fused GATED_DELTA_NET node
// (cparams.fused_gdn_ch and _ar default to true), whose result holds the
// layer's output rows and then the new states.

// qwen3nextDims are a DeltaNet layer's sizes: the key heads (ssm_n_group)
// and value heads (ssm_dt_rank) of state elements each, and the
// convolution's kernel.
type qwen3nextDims struct {
	kHeads, vHeads, state, conv int64
}

// qwen3nextBuilder returns the graph builder for a Qwen3-Next model whose
// tensors are those the description reads (the split attn_qkv/attn_gate
// projections, separate gate and up experts, a shared expert on every
// layer), nil otherwise.
func qwen3nextBuilder(m *arch.Model) graphBuilder {
	if m.NExpert <= 0 || m.NExpertUsed <= 0 || m.NExpertUsed > m.NExpert || m.MLA || m.Window > 0 || m.NHead <= 0 {
		return nil
	}
	shapes := tensorShapes(m)
	var d qwen3nextDims
	for il, l := range m.Layers {
		blk := "blk." + strconv.Itoa(il) + "."
		need := []string{"attn_norm.weight", "post_attention_norm.weight", "ffn_gate_inp.weight", "ffn_gate_exps.weight",
			"ffn_up_exps.weight", "ffn_down_exps.weight", "ffn_gate_inp_shexp.weight", "ffn_gate_shexp.weight",
			"ffn_up_shexp.weight", "ffn_down_shexp.weight"}
		switch {
		case l.Recurrent && l.Attention == arch.NoAttention:
			need = append(need, "attn_qkv.weight", "attn_gate.weight", "ssm_conv1d.weight", "ssm_dt.bias", "ssm_a",
				"ssm_ba.weight", "ssm_norm.weight", "ssm_out.weight")
			conv, dt, norm := shapes[blk+"ssm_conv1d.weight"], shapes[blk+"ssm_dt.bias"], shapes[blk+"ssm_norm.weight"]
			if len(conv) != 2 || len(dt) != 1 || len(norm) != 1 {
				return nil
			}
			state, vHeads := int64(norm[0]), int64(dt[0])
			channels := int64(conv[1])
			if state <= 0 || vHeads <= 0 || (channels-vHeads*state)%(2*state) != 0 {
				return nil
			}
			ld := qwen3nextDims{kHeads: (channels - vHeads*state) / (2 * state), vHeads: vHeads, state: state, conv: int64(conv[0])}
			if ld.kHeads <= 0 || ld.vHeads%ld.kHeads != 0 || ld.conv < 2 || (d != qwen3nextDims{} && d != ld) ||
				int64(l.RDim) != (ld.conv-1)*channels || int64(l.SDim) != state*state*vHeads {
				return nil
			}
			d = ld
		case !l.Recurrent && l.Attention == arch.Full && l.HeadsKV > 0 && l.KDim == l.VDim && l.KDim%l.HeadsKV == 0:
			need = append(need, "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
				"attn_q_norm.weight", "attn_k_norm.weight")
		default:
			return nil
		}
		for _, n := range need {
			if _, ok := shapes[blk+n]; !ok {
				return nil
			}
		}
		for _, n := range []string{"ssm_in.weight", "ffn_gate_up_exps.weight", "attn_qkv.bias", "attn_q.bias"} {
			if _, ok := shapes[blk+n]; ok {
				return nil
			}
		}
	}
	return func(m *arch.Model, c Context, nTokens int, b *gb) *graph {
		return qwen3nextGraph(m, c, nTokens, b, d)
	}
}

func qwen3nextGraph(m *arch.Model, c Context, nTokens int, b *gb, d qwen3nextDims) *graph {
	r := newRecurrentGraph(m, c, nTokens, b)
	T := r.nSeqs * r.nSeqTokens
	embd := int64(m.NEmbd)
	inpL := r.embed()
	r.rsInput()
	in := r.attnInputs(c)
	r.outIDs = b.input("inp_out_ids", gguf.TypeI32, [4]int64{r.nOut})
	w := b.fileWeight
	moe := moeArch{gating: moeSoftmax, normW: true}
	for il, l := range m.Layers {
		blk := "blk." + strconv.Itoa(il) + "."
		inpSA := inpL
		cur := r.rmsNorm("attn_norm", inpL, blk+"attn_norm.weight")
		b.g.expand(cur)
		if l.Recurrent {
			cur = r.deltaNet(il, cur, d)
		} else {
			cur = r.gatedAttention(il, c, in, cur)
		}
		// The outputs are selected after the final norm
		// (embeddings_nextn_masked is false), not here.
		cur = as(kAdd, b.f32("attn_residual", opInplace, [4]int64{embd, T}, cur, inpSA))
		res := cur
		cur = r.rmsNorm("attn_post_norm", cur, blk+"post_attention_norm.weight")
		experts := b.moeExperts(m, moe, blk, cur, T, w)
		shared := b.moeDenseFFN(blk, "_shexp", cur, T, w)
		gate := as(kMulMat, b.f32("shared_expert_gate", opOther, [4]int64{1, T}, w(blk+"ffn_gate_inp_shexp.weight"), cur))
		gate = as(kUnary, b.f32("shared_expert_gate_sigmoid", opInplace, gate.layout.ne, gate))
		shared = as(kMul, b.f32("ffn_shexp_gated", opInplace, shared.layout.ne, shared, gate))
		cur = as(kAdd, b.f32("ffn_out", opInplace, [4]int64{embd, T}, experts, shared))
		inpL = as(kAdd, b.f32("post_moe", opInplace, [4]int64{embd, T}, cur, res))
	}
	return r.output(inpL, "output_norm.weight")
}

// gatedAttention is build_layer_attn: Q is projected together with its
// output gate (views of one result), q and k are normed per head and
// roped, attention runs on the cache without an output projection, and
// the sigmoid of the gate scales the heads before attn_output.
func (r *recurrentGraph) gatedAttention(il int, c Context, in *recurrentAttnInputs, cur *gtensor) *gtensor {
	b := r.b
	l := r.m.Layers[il]
	blk := "blk." + strconv.Itoa(il) + "."
	T := r.nSeqs * r.nSeqTokens
	embd := int64(r.m.NEmbd)
	heads, headsKV := int64(r.m.NHead), int64(l.HeadsKV)
	head := int64(l.KDim) / headsKV
	qFull := as(kMulMat, b.f32("Qcur_full", opOther, [4]int64{2 * head * heads, T}, b.weight(blk+"attn_q.weight", [4]int64{embd, 2 * head * heads}), cur))
	qFull4 := b.view("Qcur_full_4d", qFull, [4]int64{2 * head, heads, T, 1})
	row := 2 * head * 4
	q := strided(b.view("Qcur_view", qFull4, [4]int64{head, heads, T, 1}), [4]int64{4, row, row * heads, row * heads * T})
	gate := strided(b.view("gate", qFull4, [4]int64{head, heads, T, 1}), [4]int64{4, row, row * heads, row * heads * T})
	k := as(kMulMat, b.f32("Kcur", opOther, [4]int64{head * headsKV, T}, b.weight(blk+"attn_k.weight", [4]int64{embd, head * headsKV}), cur))
	v := as(kMulMat, b.f32("Vcur", opOther, [4]int64{head * headsKV, T}, b.weight(blk+"attn_v.weight", [4]int64{embd, head * headsKV}), cur))
	k = b.view("Kcur_3d", k, [4]int64{head, headsKV, T})
	v = b.view("Vcur_3d", v, [4]int64{head, headsKV, T})
	q = r.rmsNorm("Qcur_normed", q, blk+"attn_q_norm.weight")
	k = r.rmsNorm("Kcur_normed", k, blk+"attn_k_norm.weight")
	q, k = r.rope("Qcur", q, in.pos), r.rope("Kcur", k, in.pos)
	att := r.attend(il, c, in, q, k, v)
	g := b.f32("gate_cont", opOther, [4]int64{head * heads, T}, gate)
	g = as(kUnary, b.f32("gate_sigmoid", opInplace, g.layout.ne, g))
	att = as(kMul, b.f32("attn_gated", opInplace, att.layout.ne, att, g))
	return as(kMulMat, b.f32("attn_output", opOther, [4]int64{embd, T}, b.weight(blk+"attn_output.weight", [4]int64{heads * head, embd}), att))
}

// deltaNet is build_layer_attn_linear with the split projections: Q, K
// and V go through a causal depthwise convolution whose last d_conv-1
// columns become the new conv state, Q and K are L2-normed (and repeated
// to the value heads), and the fused GATED_DELTA_NET node produces the
// output rows and the new delta-rule state; a gated RMS norm and ssm_out
// finish the layer. The nodes are recorded in the engine's order: only
// the conv input reaches the graph before the state writes, the z
// projection comes after the recurrence.
func (r *recurrentGraph) deltaNet(il int, cur *gtensor, d qwen3nextDims) *gtensor {
	b := r.b
	l := r.m.Layers[il]
	blk := "blk." + strconv.Itoa(il) + "."
	T, S := r.nSeqTokens, r.nSeqs
	embd := int64(r.m.NEmbd)
	keyDim, valueDim := d.kHeads*d.state, d.vHeads*d.state
	channels := 2*keyDim + valueDim
	w := func(name string, ne ...int64) *gtensor {
		var x [4]int64
		copy(x[:], ne)
		return b.weight(blk+name, x)
	}
	qkv := as(kMulMat, b.f32("qkv_mixed", opOther, [4]int64{channels, T * S}, w("attn_qkv.weight", embd, channels), cur))
	qkv3 := b.view("qkv_mixed_3d", qkv, [4]int64{channels, T, S})
	z := as(kMulMat, b.f32("z", opOther, [4]int64{valueDim, T * S}, w("attn_gate.weight", embd, valueDim), cur))
	ba := as(kMulMat, b.f32("mixed_ba", opOther, [4]int64{2 * d.vHeads, T * S}, w("ssm_ba.weight", embd, 2*d.vHeads), cur))
	per := d.vHeads / d.kHeads
	ba4 := b.view("mixed_ba_4d", ba, [4]int64{2 * per, d.kHeads, T, S})
	baRow := 2 * per * 4
	bnb := [4]int64{4, baRow, baRow * d.kHeads, baRow * d.kHeads * T}
	bv := strided(b.view("b", ba4, [4]int64{per, d.kHeads, T, S}), bnb)
	av := strided(b.view("a", ba4, [4]int64{per, d.kHeads, T, S}), bnb)
	beta := b.f32("b_cont", opOther, [4]int64{per, d.kHeads, T, S}, bv)
	beta = as(kUnary, b.f32("beta", opInplace, beta.layout.ne, beta))
	alpha := b.f32("alpha", opOther, [4]int64{d.vHeads, T, S}, av)
	alpha = as(kAdd, b.f32("alpha_biased", opInplace, alpha.layout.ne, alpha, w("ssm_dt.bias", d.vHeads)))
	alpha = as(kUnary, b.f32("a_softplus", opInplace, alpha.layout.ne, alpha))
	gate := as(kMul, b.f32("gate", opInplace, alpha.layout.ne, alpha, w("ssm_a", d.vHeads)))
	beta = b.view("beta_4d", beta, [4]int64{1, d.vHeads, T, S})
	gate = b.view("gate_4d", gate, [4]int64{1, d.vHeads, T, S})

	// build_conv_state: the states before the batch, the batch's columns
	// after them, and the last d_conv-1 columns written back.
	rCache := b.cache(il, "cache_r", [4]int64{int64(l.RDim) * r.nRS})
	conv := r.buildRS(rCache, int64(l.RDim), nil)
	conv = b.view("conv_states_3d", conv, [4]int64{d.conv - 1, channels, S})
	qkvT := b.view("qkv_mixed_t", qkv3, [4]int64{T, channels, S})
	convIn := b.f32("conv_input", opOther, [4]int64{d.conv - 1 + T, channels, S}, conv, qkvT)
	catRow := (d.conv - 1 + T) * 4
	last := strided(b.view("conv_state_last", convIn, [4]int64{d.conv - 1, channels, S}), [4]int64{4, catRow, catRow * channels})
	b.g.expand(r.cpy("conv_state_store", last, b.view("conv_state_dst", rCache, [4]int64{(d.conv - 1) * channels * S})))

	sCache := b.cache(il, "cache_s", [4]int64{int64(l.SDim) * r.nRS})
	state := r.buildRS(sCache, int64(l.SDim), nil)
	state = b.view("state_4d", state, [4]int64{d.state, d.state, d.vHeads, S})

	convOut := as(kSSMConv, b.f32("conv_output", opOther, [4]int64{channels, T, S}, convIn, w("ssm_conv1d.weight", d.conv, channels)))
	convOut = as(kUnary, b.f32("conv_output_silu", opInplace, convOut.layout.ne, convOut))
	row := channels * 4
	nb := [4]int64{d.state * 4, row, row * T}
	view := func(name string, heads int64) *gtensor {
		v := b.view(name, convOut, [4]int64{d.state, heads, T, S})
		return strided(v, [4]int64{4, nb[0], nb[1], nb[2]})
	}
	q := b.f32("q_l2", opOther, [4]int64{d.state, d.kHeads, T, S}, view("q_conv", d.kHeads))
	k := b.f32("k_l2", opOther, [4]int64{d.state, d.kHeads, T, S}, view("k_conv", d.kHeads))
	v := view("v_conv", d.vHeads)
	if d.kHeads != d.vHeads {
		repeat := func(name string, x *gtensor) *gtensor {
			x = b.view(name+"_reshaped", x, [4]int64{d.state, 1, d.kHeads, T * S})
			x = b.f32(name+"_repeated", opOther, [4]int64{d.state, per, d.kHeads, T * S}, x)
			return b.view(name+"_predelta", x, [4]int64{d.state, d.vHeads, T, S})
		}
		q, k = repeat("q", q), repeat("k", k)
	}
	// ggml_gated_delta_net: {S_v*H_v, n_tokens*n_seqs + S_v*n_seqs}.
	gdn := b.f32("gated_delta_net", opOther, [4]int64{d.state * d.vHeads, T*S + d.state*S}, q, k, v, gate, beta, state)
	out := b.view("attn_output", gdn, [4]int64{d.state, d.vHeads, T, S})
	newState := b.view("new_state", gdn, [4]int64{d.state, d.state, d.vHeads, S})
	b.g.expand(r.cpy("ssm_state_store", newState, b.view("ssm_state_dst", sCache, [4]int64{int64(l.SDim) * S})))

	// build_norm_gated: RMS norm of the output rows times silu(z).
	normed := r.rmsNorm("attn_out_norm", out, blk+"ssm_norm.weight")
	z4 := b.view("z_4d", z, [4]int64{d.state, d.vHeads, T, S})
	zs := as(kUnary, b.f32("z_silu", opInplace, z4.layout.ne, z4))
	gated := as(kMul, b.f32("attn_out_gated", opInplace, normed.layout.ne, normed, zs))
	final := b.view("final_output", gated, [4]int64{valueDim, T, S})
	y := as(kMulMat, b.f32("linear_attn_out", opOther, [4]int64{embd, T, S}, w("ssm_out.weight", valueDim, embd), final))
	return b.view("linear_attn_out_2d", y, [4]int64{embd, T * S})
}
