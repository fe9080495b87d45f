package plan

import (
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
)

// This file describes the graphs llama.cpp builds for its mixture-of-experts
// transformers: qwen2moe (src/models/qwen2moe.cpp), qwen3moe
// (src/models/qwen3moe.cpp), gpt-oss (src/models/openai-moe-iswa.cpp) and
// llama4 with chunked attention (src/models/llama-iswa.cpp). Their attention
// is llm_graph_context::build_attn over a unified or an iswa (two-cache)
// KV cache; their FFN is llm_graph_context::build_moe_ffn: router logits,
// probabilities, top-k selection with argsort and a view, get_rows of the
// selected weights, ggml_mul_mat_id over the selected experts and a sum of
// per-expert views.

// moeGating is how build_moe_ffn turns router logits into expert weights
// (llama_expert_gating_func_type).
type moeGating int

const (
	moeSoftmax       moeGating = iota // softmax over all experts (qwen2moe, qwen3moe)
	moeSigmoid                        // sigmoid, selection on the raw logits (llama4)
	moeSoftmaxWeight                  // softmax over the selected logits only (gpt-oss)
)

// moeArch is what differs between the four architectures' graphs.
type moeArch struct {
	gating moeGating
	normW  bool // weights divided by their sum (qwen3moe)
	// iswa: two KV caches (sliding or chunked layers, and the others) with
	// their own inputs; build_attn then expands Q, K and V in that order.
	iswa bool
	// biases on the router and the experts, applied with ggml_add_id, and
	// the swiglu_oai activation (gpt-oss).
	expertBiases bool
	oai          bool
	sinks        bool // per-head attention sinks (gpt-oss)
	// postNorm: the FFN norm is post_attention_norm (gpt-oss).
	postNorm bool
	// llama4: no RoPE (and temperature tuning) on every fourth layer, an
	// unweighted RMS norm of Q and K after RoPE, expert weights applied to
	// the input, a shared expert.
	llama4 bool
	// sharedGate: qwen2moe's shared expert behind a one-row sigmoid gate.
	sharedGate bool
}

// moeBuilder returns the graph builder for qwen2moe, qwen3moe, gpt-oss and llama4: mixture-of-experts transformers; nil for a model it does not describe.
func moeBuilder(m *arch.Model) graphBuilder {
	a, ok := moeDescribe(m)
	if !ok {
		return nil
	}
	return func(m *arch.Model, c Context, nTokens int, b *gb) *graph {
		return moeGraph(m, a, c, nTokens, b)
	}
}

// moeDescribe says which graph the model gets, and whether this file
// describes it: every layer must hold exactly the tensors the
// architecture's graph reads, so a variant with anything else (merged
// gate_up experts, scales, rope factors, dense layers where llama.cpp has
// none) keeps the rough estimate.
func moeDescribe(m *arch.Model) (moeArch, bool) {
	var a moeArch
	switch m.Arch {
	case "qwen2moe":
		a = moeArch{gating: moeSoftmax, sharedGate: true}
	case "qwen3moe":
		a = moeArch{gating: moeSoftmax, normW: true}
	case "gpt-oss":
		a = moeArch{gating: moeSoftmaxWeight, iswa: true, expertBiases: true, oai: true, sinks: true, postNorm: true}
	case "llama4":
		a = moeArch{gating: moeSigmoid, iswa: true, llama4: true}
	default:
		return a, false
	}
	if m.MLA || m.NExpert <= 0 || m.NExpertUsed <= 0 || m.NExpertUsed > m.NExpert || len(m.Layers) == 0 || m.NHead <= 0 {
		return a, false
	}
	// gpt-oss always uses the iswa cache; llama4 only with chunked
	// attention (an explicit sliding_window of 0 selects llm_build_llama).
	if a.iswa && m.Window <= 0 {
		return a, false
	}
	if !a.iswa && m.Window > 0 {
		return a, false
	}
	shape := map[string][]uint64{}
	for _, t := range m.Tensors {
		if !t.Unused {
			shape[t.Name] = t.Shape
		}
	}
	// Tensors per block, counted once: each layer must hold exactly the
	// tensors its graph reads.
	perBlock := make([]int, len(m.Layers))
	for n := range shape {
		rest, ok := strings.CutPrefix(n, "blk.")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(rest, ".")
		if il, err := strconv.Atoi(num); err == nil && il >= 0 && il < len(perBlock) && strconv.Itoa(il) == num {
			perBlock[il]++
		}
	}
	headK := 0
	for il, l := range m.Layers {
		if l.Recurrent || l.Attention == arch.NoAttention || l.HeadsKV <= 0 || l.VDim <= 0 ||
			l.KDim%l.HeadsKV != 0 || l.VDim%l.HeadsKV != 0 || l.KDim != l.VDim {
			return a, false
		}
		if l.Attention == arch.Sliding && !a.iswa {
			return a, false
		}
		if headK == 0 {
			headK = l.KDim / l.HeadsKV
		}
		if l.KDim/l.HeadsKV != headK {
			return a, false
		}
		blk := "blk." + strconv.Itoa(il) + "."
		want := moeLayerTensors(a, blk, shape)
		if want == nil {
			return a, false
		}
		for _, n := range want {
			if _, ok := shape[blk+n]; !ok {
				return a, false
			}
		}
		if perBlock[il] != len(want) {
			return a, false
		}
		q := shape[blk+"attn_q.weight"]
		if len(q) != 2 || int(q[1])%headK != 0 {
			return a, false
		}
	}
	for n := range shape {
		switch {
		case strings.HasPrefix(n, "blk."):
		case n == "token_embd.weight", n == "output_norm.weight", n == "output.weight":
		default:
			return a, false
		}
	}
	if _, ok := shape["token_embd.weight"]; !ok {
		return a, false
	}
	if _, ok := shape["output_norm.weight"]; !ok {
		return a, false
	}
	return a, true
}

// moeLayerTensors lists the tensors the architecture's graph reads in one
// layer, or nil if the layer has none of its FFN layouts.
func moeLayerTensors(a moeArch, blk string, shape map[string][]uint64) []string {
	has := func(n string) bool { _, ok := shape[blk+n]; return ok }
	names := []string{"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight"}
	if has("attn_q.bias") || a.expertBiases {
		names = append(names, "attn_q.bias", "attn_k.bias", "attn_v.bias")
	}
	if a.postNorm {
		names = append(names, "post_attention_norm.weight")
	} else {
		names = append(names, "ffn_norm.weight")
	}
	experts := []string{"ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"}
	shared := []string{"ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight"}
	switch {
	case a.sharedGate: // qwen2moe
		names = append(names, experts...)
		names = append(names, shared...)
		names = append(names, "ffn_gate_inp_shexp.weight")
	case a.expertBiases: // gpt-oss
		names = append(names, "attn_output.bias", "attn_sinks.weight")
		names = append(names, experts...)
		names = append(names, "ffn_gate_inp.bias", "ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias")
	case a.llama4:
		if has("ffn_gate_inp.weight") {
			names = append(names, experts...)
			names = append(names, shared...)
		} else {
			names = append(names, "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight")
		}
	default: // qwen3moe
		names = append(names, "attn_q_norm.weight", "attn_k_norm.weight")
		if !has("attn_q_norm.weight") {
			return nil
		}
		names = append(names, experts...)
	}
	return names
}

// moeInputs are the attention inputs of one cache (build_attn_inp_kv, or
// each half of build_attn_inp_kv_iswa): the write indices and the mask.
// They enter the graph where a layer first reads them.
type moeInputs struct {
	kIdx, vIdx, mask *gtensor
	nKV              int64
	// kRot and vRot rotate a quantized cache's rows (swaCacheInputs).
	kRot, vRot *gtensor
}

// moeGraph describes the graph for one micro-batch of nTokens against a
// full cache, in the order ggml records it.
func moeGraph(m *arch.Model, a moeArch, c Context, nTokens int, b *gb) *graph {
	b.init(m)
	shape := b.shapes
	w := b.fileWeight
	T, nOut := reserveTokens(c, nTokens)
	embd := int64(m.NEmbd)

	tokens := b.input("inp_tokens", gguf.TypeI32, [4]int64{T})
	// build_inp_embd: token ids and ready-made embeddings, one selected;
	// the unused vector input is a leaf that is never freed.
	vecEmbd := b.input("inp_embd", gguf.TypeF32, [4]int64{embd, T})
	inpL := b.f32("embd", opOther, [4]int64{embd, T}, w("token_embd.weight"), tokens)
	inpL.gather = true
	b.g.expand(inpL)
	b.g.expand(vecEmbd)
	pos := b.input("inp_pos", gguf.TypeI32, [4]int64{T})
	var attnScale *gtensor
	if a.llama4 {
		// Temperature tuning of the layers without RoPE
		// (build_inp_attn_scale): one factor per token.
		attnScale = b.input("attn_scale", gguf.TypeF32, [4]int64{1, 1, T})
	}
	// Each cache's inputs (write indices, mask, and the rotations of a
	// quantized cache), as for the sliding-window models.
	newInputs := func(nKV int64, suffix string) *moeInputs {
		kv := b.swaCacheInputs(m, c, T, nKV, suffix != "")
		return &moeInputs{kIdx: kv.kIdx, vIdx: kv.vIdx, mask: kv.mask, nKV: nKV, kRot: kv.kRot, vRot: kv.vRot}
	}
	full := newInputs(int64(c.NCtxSeq), "")
	swa := full
	if a.iswa {
		cells := c.NCtxSeq
		if !c.SWAFull {
			// llama_kv_cache_iswa: the window of each stream plus a
			// micro-batch, padded to 256, at most the full cache.
			cells = pad(min(c.NCtxSeq, m.Window*swaSeqs(c)+c.NUBatch), 256)
		}
		swa = newInputs(int64(cells), "_swa")
	}
	outIDs := b.input("inp_out_ids", gguf.TypeI32, [4]int64{nOut})

	for il, l := range m.Layers {
		rows := T // the rows this layer's FFN runs on
		blk := "blk." + strconv.Itoa(il) + "."
		inpSA := inpL
		cur := b.moeNorm(inpL, w(blk+"attn_norm.weight"))
		in := full
		if l.Attention == arch.Sliding {
			in = swa
		}
		cur = b.moeAttention(m, a, c, il, l, cur, pos, attnScale, in, T, w)
		if il == len(m.Layers)-1 && !a.oai {
			// Only the rows of the outputs go on (inp_out_ids; all of
			// them in the worst-case graph). gpt-oss selects them after
			// the last layer instead.
			rows = nOut
			cur = b.f32("get_rows_cur", opOther, [4]int64{embd, rows}, cur, outIDs)
			inpSA = b.f32("get_rows_inp", opOther, [4]int64{embd, rows}, inpSA, outIDs)
		}
		ffnInp := b.f32("ffn_inp", opInplace, [4]int64{embd, rows}, cur, inpSA)
		normName := blk + "ffn_norm.weight"
		if a.postNorm {
			normName = blk + "post_attention_norm.weight"
		}
		cur = b.moeNorm(ffnInp, w(normName))
		if _, ok := shape[blk+"ffn_gate_inp.weight"]; ok {
			moe := b.moeExperts(m, a, blk, cur, rows, w)
			switch {
			case a.sharedGate:
				// qwen2moe: the shared expert scaled by sigmoid(x·g),
				// computed as silu(v)/v.
				sh := b.moeDenseFFN(blk, "_shexp", cur, rows, w)
				gin := b.f32("ffn_shexp_gate_inp", opOther, [4]int64{1, rows}, w(blk+"ffn_gate_inp_shexp.weight"), cur)
				silu := b.f32("ffn_shexp_silu", opInplace, gin.layout.ne, gin)
				gate := b.f32("ffn_shexp_gate", opInplace, gin.layout.ne, silu, gin)
				sh = b.f32("ffn_shexp_out", opInplace, sh.layout.ne, sh, gate)
				moe = b.f32("ffn_out", opInplace, moe.layout.ne, moe, sh)
			case a.llama4:
				sh := b.moeDenseFFN(blk, "_shexp", cur, rows, w)
				moe = b.f32("ffn_moe_out_merged", opInplace, moe.layout.ne, moe, sh)
			}
			cur = moe
		} else {
			cur = b.moeDenseFFN(blk, "", cur, rows, w)
		}
		inpL = b.f32("l_out", opInplace, [4]int64{embd, rows}, cur, ffnInp)
	}
	if a.oai {
		// gpt-oss keeps every row to the end of the last layer, whose
		// output seeds a draft head (t_h_nextn): a graph output the
		// allocator never frees, whether or not a draft runs. The rows
		// of the outputs are taken from it.
		inpL.output = true
		inpL = b.f32("h_nextn_rows", opOther, [4]int64{embd, nOut}, inpL, outIDs)
	}
	cur := b.moeNorm(inpL, w("output_norm.weight"))
	cur.output = true
	logits := b.f32("result_output", opOther, [4]int64{int64(m.NVocab), nOut}, w("output.weight"), cur)
	logits.output = true
	b.g.expand(logits)
	return &b.g
}

// moeAttention records a layer's self-attention (build_attn with the KV
// cache, or its iswa variant) from the normed input to the output
// projection, as llama.cpp expands it.
func (b *gb) moeAttention(m *arch.Model, a moeArch, c Context, il int, l arch.Layer, cur, pos, attnScale *gtensor, in *moeInputs, T int64, w func(string) *gtensor) *gtensor {
	blk := "blk." + strconv.Itoa(il) + "."
	streams := int64(c.NStream)
	headsKV := int64(l.HeadsKV)
	headK := int64(l.KDim) / headsKV
	headV := int64(l.VDim) / headsKV
	qw := w(blk + "attn_q.weight")
	heads := qw.layout.ne[1] / headK
	embd := cur.layout.ne[0]
	q := b.f32("Qcur", opOther, [4]int64{heads * headK, T}, qw, cur)
	k := b.f32("Kcur", opOther, [4]int64{headsKV * headK, T}, w(blk+"attn_k.weight"), cur)
	v := b.f32("Vcur", opOther, [4]int64{headsKV * headV, T}, w(blk+"attn_v.weight"), cur)
	if b.has(blk + "attn_q.bias") {
		q = b.f32("Qcur_b", opInplace, q.layout.ne, q, w(blk+"attn_q.bias"))
		k = b.f32("Kcur_b", opInplace, k.layout.ne, k, w(blk+"attn_k.bias"))
		v = b.f32("Vcur_b", opInplace, v.layout.ne, v, w(blk+"attn_v.bias"))
	}
	q = b.view("Qcur_3d", q, [4]int64{headK, heads, T})
	k = b.view("Kcur_3d", k, [4]int64{headK, headsKV, T})
	v = b.view("Vcur_3d", v, [4]int64{headV, headsKV, T})
	if b.has(blk + "attn_q_norm.weight") {
		// qwen3moe: per-head RMS norms with weights before RoPE; the norm
		// of a reshaped projection cannot run in place.
		q = b.moeNorm(q, w(blk+"attn_q_norm.weight"))
		k = b.moeNorm(k, w(blk+"attn_k_norm.weight"))
	}
	// llama4 leaves RoPE out on every fourth layer
	// (n_no_rope_layer_step) and scales Q there instead.
	rope := !a.llama4 || (il+1)%4 != 0
	if rope {
		q = b.f32("Qcur_rope", opInplace, q.layout.ne, q, pos)
		k = b.f32("Kcur_rope", opInplace, k.layout.ne, k, pos)
		if a.llama4 {
			// Llama4TextL2Norm: an RMS norm without weight.
			q = b.f32("Qcur_normed", opInplace, q.layout.ne, q)
			k = b.f32("Kcur_normed", opInplace, k.layout.ne, k)
		}
	} else if attnScale != nil {
		q = b.f32("Qcur_scaled", opInplace, q.layout.ne, q, attnScale)
	}
	// A quantized cache is written and read through Hadamard rotations.
	if in.kRot != nil {
		q = b.swaRotate(q, in.kRot, false)
		k = b.swaRotate(k, in.kRot, false)
	}
	if in.vRot != nil {
		v = b.swaRotate(v, in.vRot, false)
	}
	// build_attn expands Q, V, K (K last so that RoPE can be fused with
	// the cache write); the iswa variant expands Q, K, V.
	b.g.expand(q)
	if a.iswa {
		b.g.expand(k)
		b.g.expand(v)
	} else {
		b.g.expand(v)
		b.g.expand(k)
	}
	var sinks *gtensor
	if a.sinks {
		sinks = w(blk + "attn_sinks.weight")
	}
	cur = b.kvAttention(il, c, attnShape{heads, headsKV, headK, headV, in.nKV, streams, T}, q, k, v, in.kIdx, in.vIdx, in.mask, sinks)
	if in.vRot != nil {
		cur = b.swaRotate(cur, in.vRot, false)
	}
	cur = b.f32("attn_out", opOther, [4]int64{embd, T}, w(blk+"attn_output.weight"), cur)
	if b.has(blk + "attn_output.bias") {
		cur = b.f32("attn_out_b", opInplace, cur.layout.ne, cur, w(blk+"attn_output.bias"))
	}
	return cur
}
