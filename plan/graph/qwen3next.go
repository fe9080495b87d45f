package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/ggml"
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

// qwen3next is Qwen3-Next's family: it describes a model whose tensors
// are those the description reads (the split attn_qkv/attn_gate
// projections, separate gate and up experts, a shared expert on every
// layer).
type qwen3next struct{}

func (qwen3next) graphOf(m *arch.Model) graphFunc {
	if m.NExpert <= 0 || m.NExpertUsed <= 0 || m.NExpertUsed > m.NExpert || m.MLA || m.Window > 0 || m.NHead <= 0 {
		return nil
	}
	d, ok := deltaNetLayers(m, deltaNetTensors{ffn: qwenMoETensors(), ba: []string{"ssm_ba.weight"}, not: []string{"ssm_in.weight", "ffn_gate_up_exps.weight"}})
	if !ok {
		return nil
	}
	return func(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
		return qwen3nextGraph(m, c, nTokens, b, d)
	}
}

// qwenMoETensors are the FFN tensors of Qwen3-Next's and Qwen3.5 MoE's
// layers (qwenMoE).
func qwenMoETensors() []string {
	return []string{"ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight",
		"ffn_gate_inp_shexp.weight", "ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight"}
}

// deltaNetTensors are what sets the gated DeltaNet hybrids' tensors apart:
// the FFN's, the beta/alpha projections', and tensors whose presence
// means a form the graph does not describe.
type deltaNetTensors struct {
	ffn, ba, not []string
}

// deltaNetLayers checks every layer of a gated DeltaNet hybrid: a DeltaNet
// layer (the same sizes in every one) or a gated attention layer, each
// with its norms and the family's FFN and projections, and none of its
// excluded tensors. It returns the DeltaNet sizes.
func deltaNetLayers(m *arch.Model, t deltaNetTensors) (qwen3nextDims, bool) {
	shapes := tensorShapes(m)
	var d qwen3nextDims
	not := append([]string{"attn_qkv.bias", "attn_q.bias"}, t.not...)
	for il, l := range trunk(m) {
		blk := blkName(il)
		need := append([]string{"attn_norm.weight", "post_attention_norm.weight"}, t.ffn...)
		switch {
		case l.Recurrent && l.Attention == arch.NoAttention:
			need = append(need, "attn_qkv.weight", "attn_gate.weight", "ssm_conv1d.weight", "ssm_dt.bias", "ssm_a",
				"ssm_norm.weight", "ssm_out.weight")
			need = append(need, t.ba...)
			ld, ok := deltaNetDims(shapes, blk, l)
			if !ok || (d != qwen3nextDims{} && d != ld) {
				return d, false
			}
			d = ld
		case !l.Recurrent && l.Attention == arch.Full && l.HeadsKV > 0 && l.KDim == l.VDim && l.KDim%l.HeadsKV == 0:
			need = append(need, "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
				"attn_q_norm.weight", "attn_k_norm.weight")
		default:
			return d, false
		}
		for _, n := range need {
			if _, ok := shapes[blk+n]; !ok {
				return d, false
			}
		}
		for _, n := range not {
			if _, ok := shapes[blk+n]; ok {
				return d, false
			}
		}
	}
	return d, true
}

// deltaNetDims reads a gated DeltaNet layer's sizes from its tensors
// (ssm_conv1d's kernel and channels, ssm_dt's value heads, ssm_norm's
// state width) and checks them against the layer's caches; ok is false
// for sizes the engine would not run.
func deltaNetDims(shapes map[string][]uint64, blk string, l arch.Layer) (qwen3nextDims, bool) {
	conv, dt, norm := shapes[blk+"ssm_conv1d.weight"], shapes[blk+"ssm_dt.bias"], shapes[blk+"ssm_norm.weight"]
	if len(conv) != 2 || len(dt) != 1 || len(norm) != 1 {
		return qwen3nextDims{}, false
	}
	state, vHeads := int64(norm[0]), int64(dt[0])
	channels := int64(conv[1])
	if state <= 0 || vHeads <= 0 || (channels-vHeads*state)%(2*state) != 0 {
		return qwen3nextDims{}, false
	}
	d := qwen3nextDims{kHeads: (channels - vHeads*state) / (2 * state), vHeads: vHeads, state: state, conv: int64(conv[0])}
	ok := d.kHeads > 0 && d.vHeads%d.kHeads == 0 && d.conv >= 2 &&
		int64(l.RDim) == (d.conv-1)*channels && int64(l.SDim) == state*state*vHeads
	return d, ok
}

// gdnOpts is what sets Qwen3.5's graph apart from Qwen3-Next's: beta and
// alpha projected apart, Q viewed without a reshape and the key heads not
// repeated (qwen35), and a dense FFN where Qwen3-Next has experts (moe
// false).
type gdnOpts struct {
	qwen35, moe bool
}

func qwen3nextGraph(m *arch.Model, c Context, nTokens int, b *gb, d qwen3nextDims) *ggml.Graph {
	return gatedDeltaNetGraph(m, c, nTokens, b, d, gdnOpts{moe: true})
}

// gatedDeltaNetGraph is qwen3next.cpp's and qwen35(moe).cpp's graph: the
// mixer behind a norm, the residual, the post-attention norm, the FFN and
// the residual again; the outputs are selected after the final norm
// (embeddings_nextn_masked is false), not in the last layer.
func gatedDeltaNetGraph(m *arch.Model, c Context, nTokens int, b *gb, d qwen3nextDims, o gdnOpts) *ggml.Graph {
	r := newRSGraph(m, c, nTokens, b)
	inpL := r.inpL
	r.attnInputs()
	for il, l := range trunk(m) {
		blk := blkName(il)
		cur := b.norm(inpL, blk+"attn_norm.weight")
		b.Expand(cur)
		if l.Recurrent {
			cur = r.deltaNet(il, cur, d, o.qwen35)
		} else {
			cur = r.gatedAttention(il, cur, !o.qwen35)
		}
		res := b.Add(cur, inpL)
		cur = b.norm(res, blk+"post_attention_norm.weight")
		if o.moe {
			cur = b.qwenMoE(m, blk, cur)
		} else {
			cur = b.ffn(blk, "", cur, ffnSwiGLU)
		}
		inpL = b.Add(cur, res)
	}
	return r.output(inpL, "output_norm.weight", true)
}

// qwenMoE is Qwen3-Next's and Qwen3.5's build_layer_ffn: routed experts
// (softmax gating, weights normalized) plus one shared expert scaled by
// the sigmoid of its own gate.
func (b *gb) qwenMoE(m *arch.Model, blk string, cur *tensor) *tensor {
	experts := b.moeFFN(m, blk, cur, moeSpec{gating: moeSoftmax, normW: true})
	gate := b.UnaryOf(ggml.UnarySigmoid, b.MulMat(b.weight(blk+"ffn_gate_inp_shexp.weight"), cur))
	shared := b.Mul(b.ffn(blk, "_shexp", cur, ffnSwiGLU), gate)
	return b.Add(experts, shared)
}

// gatedAttention is build_layer_attn: Q is projected together with its
// output gate (views of one result), q and k are normed per head and
// roped, attention runs on the cache without an output projection, and
// the sigmoid of the gate scales the heads before attn_output.
//
// Qwen3-Next reshapes the joint projection to heads before its views;
// Qwen3.5 views the projection as it is (reshapeQ false), one node
// fewer.
func (r *rsGraph) gatedAttention(il int, cur *tensor, reshapeQ bool) *tensor {
	b, c, kv, pos := r.b, r.c, r.kv, r.pos
	blk := blkName(il)
	s := layerShape(r.m, r.m.Layers[il], c, kv, r.tokens())
	T, head := s.T, s.headK
	qFull := b.MulMat(b.weight(blk+"attn_q.weight"), cur)
	if reshapeQ {
		qFull = b.Reshape(qFull, 2*head, s.heads, T, 1)
	}
	row := 2 * head * 4
	q := b.View(qFull, head, s.heads, T, 1).Strided(row, row*s.heads, row*s.heads*T)
	gate := b.View(qFull, head, s.heads, T, 1).Strided(row, row*s.heads, row*s.heads*T)
	k := b.Reshape(b.MulMat(b.weight(blk+"attn_k.weight"), cur), head, s.headsKV, T)
	v := b.Reshape(b.MulMat(b.weight(blk+"attn_v.weight"), cur), head, s.headsKV, T)
	q = b.Rope(b.norm(q, blk+"attn_q_norm.weight"), pos, nil)
	k = b.Rope(b.norm(k, blk+"attn_k_norm.weight"), pos, nil)
	att := b.attn(il, c, kv, s, q, k, v, attnOpts{})
	att = b.Mul(att, b.UnaryOf(ggml.UnarySigmoid, b.Cont(gate, head*s.heads, T)))
	return b.MulMat(b.weight(blk+"attn_output.weight"), att)
}

// deltaNet is build_layer_attn_linear with the split QKV and gate
// projections. Qwen3-Next takes beta and alpha as views of one ssm_ba
// projection and repeats the key heads to the value heads; Qwen3.5
// (qwen35) projects them apart and leaves the key heads to the fused op's
// broadcast.
func (r *rsGraph) deltaNet(il int, cur *tensor, d qwen3nextDims, qwen35 bool) *tensor {
	b := r.b
	blk := blkName(il)
	T, S := r.nSeqTokens, r.nSeqs
	channels := 2*d.kHeads*d.state + d.vHeads*d.state
	qkv := b.Reshape(b.MulMat(b.weight(blk+"attn_qkv.weight"), cur), channels, T, S)
	z := b.MulMat(b.weight(blk+"attn_gate.weight"), cur)
	var beta, alpha *tensor
	if qwen35 {
		beta = b.UnaryOf(ggml.UnarySigmoid, b.Reshape(b.MulMat(b.weight(blk+"ssm_beta.weight"), cur), 1, d.vHeads, T, S))
		alpha = b.Reshape(b.MulMat(b.weight(blk+"ssm_alpha.weight"), cur), d.vHeads, T, S)
	} else {
		per := d.vHeads / d.kHeads
		ba := b.Reshape(b.MulMat(b.weight(blk+"ssm_ba.weight"), cur), 2*per, d.kHeads, T, S)
		baRow := 2 * per * 4
		bv := b.View(ba, per, d.kHeads, T, S).Strided(baRow, baRow*d.kHeads, baRow*d.kHeads*T)
		av := b.View(ba, per, d.kHeads, T, S).Strided(baRow, baRow*d.kHeads, baRow*d.kHeads*T)
		beta = b.Reshape(b.UnaryOf(ggml.UnarySigmoid, b.Cont(bv)), 1, d.vHeads, T, S)
		alpha = b.Cont(av, d.vHeads, T, S)
	}
	alpha = b.UnaryOf(ggml.UnarySoftplus, b.Add(alpha, b.weight(blk+"ssm_dt.bias")))
	gate := b.Reshape(b.Mul(alpha, b.weight(blk+"ssm_a")), 1, d.vHeads, T, S)
	return r.deltaRule(il, d, qkv, z, beta, gate, !qwen35)
}

// deltaRule is what Qwen3-Next's and Qwen3.5's linear attention share
// after their projections: Q, K and V go through a causal depthwise
// convolution whose last d_conv-1 columns become the new conv state, Q
// and K are L2-normed (and, where repeat says so, repeated to the value
// heads), and the fused GATED_DELTA_NET node produces the output rows and
// the new delta-rule state; a gated RMS norm and ssm_out finish the
// layer. The nodes are recorded in the engine's order: only the conv
// input reaches the graph before the state writes, the z projection comes
// after the recurrence.
func (r *rsGraph) deltaRule(il int, d qwen3nextDims, qkv, z, beta, gate *tensor, repeat bool) *tensor {
	b := r.b
	blk := blkName(il)
	T, S := r.nSeqTokens, r.nSeqs
	valueDim := d.vHeads * d.state
	channels := 2*d.kHeads*d.state + valueDim
	per := d.vHeads / d.kHeads

	// build_conv_state: the states before the batch, the batch's columns
	// after them, and the last d_conv-1 columns written back.
	convIn := r.convState(il, d.conv, channels, qkv)
	sDim := int64(r.m.Layers[il].SDim)
	sCache := b.cache(il, "cache_s", gguf.TypeF32, sDim*r.nRS)
	state := b.Reshape(r.buildRS(sCache, sDim, nil), d.state, d.state, d.vHeads, S)

	convOut := b.UnaryOf(ggml.UnarySiLU, b.SSMConv(convIn, b.weight(blk+"ssm_conv1d.weight")))
	row := channels * 4
	view := func(heads int64) *tensor {
		return b.View(convOut, d.state, heads, T, S).Strided(d.state*4, row, row*T)
	}
	q := b.gdnNorm(view(d.kHeads))
	k := b.gdnNorm(view(d.kHeads))
	v := view(d.vHeads)
	if repeat && d.kHeads != d.vHeads {
		rep := func(x *tensor) *tensor {
			x = b.Repeat(b.Reshape(x, d.state, 1, d.kHeads, T*S), d.state, per, d.kHeads, T*S)
			return b.Reshape(x, d.state, d.vHeads, T, S)
		}
		q, k = rep(q), rep(k)
	}
	gdn := b.GatedDeltaNet(q, k, v, gate, beta, state, int64(1+r.c.NRSSeq))
	out := b.View(gdn, d.state, d.vHeads, T, S)
	b.Expand(b.Cpy(b.View(gdn, d.state, d.state, d.vHeads, S), b.View(sCache, sDim*S)))

	// build_norm_gated: RMS norm of the output rows times silu(z).
	zs := b.UnaryOf(ggml.UnarySiLU, b.Reshape(z, d.state, d.vHeads, T, S))
	gated := b.Mul(b.norm(out, blk+"ssm_norm.weight"), zs)
	y := b.MulMat(b.weight(blk+"ssm_out.weight"), b.Reshape(gated, valueDim, T, S))
	return b.Reshape(y, int64(r.m.NEmbd), T*S)
}

// gdnNorm is the L2 norm of the gated delta net's q and k: ggml_l2_norm,
// or from v0.5.0 build_gdn_l2_norm's RMS norm scaled by 1/sqrt(n).
func (b *gb) gdnNorm(x *tensor) *tensor {
	if b.rules.GDNNormAsRMS {
		return b.Scale(b.RMSNorm(x))
	}
	return b.L2Norm(x)
}

// trunk is the model's layers without the NextN (MTP) blocks after them,
// which the main graph does not run (qwen35.cpp loops to n_layer()).
func trunk(m *arch.Model) []arch.Layer {
	return m.Layers[:len(m.Layers)-m.NextN]
}
