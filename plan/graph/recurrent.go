package graph

import (
	"strconv"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file holds the blocks of recurrent graphs (llm_graph_context_mamba
// and build_rs): the recurrent state lives in the rs buffer, a cache
// outside the graph like the KV cache; build_rs gathers the states of the
// micro-batch's sequences with get_rows, a layer updates them, and
// ggml_cpy writes the final states back into views of the cache.

// rsGraph is a recurrent graph's micro-batch and its shared inputs.
type rsGraph struct {
	b *gb
	m *arch.Model
	// nSeqs sequences of nSeqTokens tokens each (llama_ubatch); nRS is the
	// number of state cells the full reserve context copies (its size).
	nSeqs, nSeqTokens, nRS int64
	// nOut is the rows kept past the output selection.
	nOut                  int64
	sCopyMain, sCopyExtra *tensor
	// inpL is the embedded input, outIDs the output rows' ids.
	inpL, outIDs *tensor
	// c, kv and pos are the context and the attention inputs of a hybrid
	// (attnInputs); rope says its attention ropes Q and K, qkNorm that it
	// norms them per head first.
	c            Context
	kv           *kvInputs
	pos          *tensor
	rope, qkNorm bool
}

// newRSGraph sets up the micro-batch as graph_reserve does: the prompt
// graph splits n_ubatch tokens over one sequence per stream (all
// n_seq_max without a unified cache), the generation graph one token per
// sequence; then it records the token embedding and makes build_rs_inp's
// state-copy input: one I32 index per state cell, viewed as the cells of
// the batch's sequences and the other ones.
func newRSGraph(m *arch.Model, c Context, nTokens int, b *gb) *rsGraph {
	seqs := int64(max(c.NStream, 1))
	T := (int64(nTokens) + seqs - 1) / seqs * seqs
	r := &rsGraph{b: b, m: m, c: c, nSeqs: seqs, nSeqTokens: T / seqs, nRS: int64(max(1, c.NSeq)), nOut: c.outputRows(T)}
	r.inpL = b.inputEmbd(m, T)
	sCopy := b.Input("s_copy", gguf.TypeI32, r.nRS)
	r.sCopyMain = b.View(sCopy, r.nSeqs)
	r.sCopyExtra = b.View(sCopy, r.nRS-r.nSeqs)
	r.outIDs = b.Input("inp_out_ids", gguf.TypeI32, r.nOut)
	return r
}

// lastRows selects the output rows of the layer's output and of its
// residual when the layer is the last.
func (r *rsGraph) lastRows(il int, cur, resid *tensor) (*tensor, *tensor) {
	if il != len(r.m.Layers)-1 {
		return cur, resid
	}
	return r.b.GetRows(cur, r.outIDs), r.b.GetRows(resid, r.outIDs)
}

// mamba2 is build_mamba2_layer for layer il (see mamba2Layer).
func (r *rsGraph) mamba2(il int, cur *tensor) *tensor {
	d, _ := recurrentMamba2Dims(r.m, r.b.shapes, il)
	return r.mamba2Layer(il, cur, d)
}

// tokens is the micro-batch's token count.
func (r *rsGraph) tokens() int64 { return r.nSeqs * r.nSeqTokens }

// attnInputs makes build_inp_mem_hybrid's attention inputs and the
// positions.
func (r *rsGraph) attnInputs() {
	T := r.tokens()
	r.pos = r.b.Input("inp_pos", gguf.TypeI32, T*posPerToken(r.m))
	r.kv = r.b.kvCacheInputs(r.m, r.c, T, int64(r.c.NCtxSeq), "", attnLayers, true)
}

// layers runs every layer's block (mix[il], see r.mix) on the layer's
// input, selects the last layer's output rows where selectRows says so,
// and hands the block's output and the residual to post, which adds them
// and whatever follows; it returns the last layer's output.
func (r *rsGraph) layers(mix []mixer, selectRows bool, post func(il int, blk string, cur, resid *tensor) *tensor) *tensor {
	inpL := r.inpL
	for il, x := range mix {
		cur, resid := r.mix(il, x, inpL), inpL
		if selectRows {
			cur, resid = r.lastRows(il, cur, resid)
		}
		inpL = post(il, "blk."+strconv.Itoa(il)+".", cur, resid)
	}
	return inpL
}

// mix is layer il's block x on the layer's normed input.
func (r *rsGraph) mix(il int, x mixer, inpL *tensor) *tensor {
	b := r.b
	blk := blkName(il)
	cur := b.norm(inpL, blk+"attn_norm.weight")
	switch x {
	case mixMamba2:
		return r.mamba2(il, cur)
	case mixShortConv:
		return r.shortConv(il, cur)
	case mixMLP:
		return b.ffn(blk, "", cur, ffnReluSqr)
	case mixParallel:
		// attention and Mamba-2 side by side, the mixer on its own norm
		// of the input
		attn := r.attention(il, cur)
		return b.Add(attn, r.mamba2(il, b.norm(inpL, blk+"attn_norm.weight")))
	}
	return r.attention(il, cur)
}

// buildRS is llm_graph_context::build_rs on a state cache s of stateSize
// floats per cell: clear the zeroed cell in place, gather the batch's
// states (with rows, or get_rows by default), and copy the states of the
// other cells (none in the reserve graph, empty tensors).
func (r *rsGraph) buildRS(s *tensor, stateSize int64, rows func(states, ids *tensor) *tensor) *tensor {
	b := r.b
	states := b.Reshape(s, stateSize, r.nRS)
	// ggml_scale_inplace: a view of the cache that the scheduler runs
	// where the cache lives.
	b.Expand(b.ScaleInplace(b.View(states, stateSize)))
	var out *tensor
	if rows != nil {
		out = rows(states, r.sCopyMain)
	} else {
		out = b.GetRows(states, r.sCopyMain)
	}
	b.Expand(out)
	extra := b.GetRows(states, r.sCopyExtra)
	b.Expand(b.Cpy(extra, b.View(s, stateSize*(r.nRS-r.nSeqs))))
	return out
}

// convState is build_rs on layer il's conv state for a convolution of
// kernel conv over channels, concatenated with the batch's columns x
// (transposed), the last conv-1 columns written back; it returns the
// concatenation.
func (r *rsGraph) convState(il int, conv, channels int64, x *tensor) *tensor {
	b := r.b
	l := r.m.Layers[il]
	S := r.nSeqs
	rCache := b.cache(il, "cache_r", gguf.TypeF32, int64(l.RDim)*r.nRS)
	state := b.Reshape(r.buildRS(rCache, int64(l.RDim), nil), conv-1, channels, S)
	cat := b.Concat(state, b.Transpose(x), 0)
	// The views keep their parent's row strides: a copy of one to another
	// backend holds everything from its first element to its last
	// (ggml_nbytes), most of the parent.
	catRow := cat.Ne()[0] * 4
	last := b.View(cat, conv-1, channels, S).Strided(catRow, catRow*channels)
	b.Expand(b.Cpy(last, b.View(rCache, (conv-1)*channels*S)))
	return cat
}

// columns are views of n columns of x {rows, T, S}, each as wide as
// shape's first dimensions: the strided views into a fused projection.
func (r *rsGraph) columns(x *tensor, n int, ne ...int64) []*tensor {
	row := x.Ne()[0] * 4
	T, S := r.nSeqTokens, r.nSeqs
	out := make([]*tensor, n)
	for i := range out {
		full := append(append([]int64(nil), ne...), T, S)
		v := r.b.View(x, full...)
		if len(ne) == 2 {
			v.Strided(ne[0]*4, row, row*T)
		} else {
			v.Strided(row, row*T)
		}
		out[i] = v
	}
	return out
}

// mamba2Layer is build_mamba2_layer for layer il on its normed input cur
// {n_embd, n_tokens}; it returns the mixer's output {n_embd, n_tokens}.
// The projection runs on the 2D input and is reshaped after it, and the
// output projection on the 2D y, as the engine has them: the nodes and
// their order are what the Vulkan reorder walks.
func (r *rsGraph) mamba2Layer(il int, cur *tensor, d recurrentSSM) *tensor {
	b := r.b
	blk := blkName(il)
	T, S := r.nSeqTokens, r.nSeqs
	headDim := d.inner / d.heads
	channels := d.inner + 2*d.groups*d.state
	zx := b.Reshape(b.MulMat(b.weight(blk+"ssm_in.weight"), cur), d.inProj, T, S)
	z := r.columns(zx, 1, headDim, d.heads)[0]
	xBC := r.columns(zx, 1, channels)[0]
	dt := r.columns(zx, 1, d.heads)[0]
	convX := r.convState(il, d.conv, channels, xBC)
	xBC = b.SSMConv(convX, b.weight(blk+"ssm_conv1d.weight"))
	xBC = b.UnaryOf(ggml.UnarySiLU, b.Add(xBC, b.weight(blk+"ssm_conv1d.bias")))
	x := r.columns(xBC, 1, headDim, d.heads)[0]
	bc := r.columns(xBC, 2, d.state, d.groups)
	dt = b.Add(b.Cont(dt), b.weight(blk+"ssm_dt.bias"))
	A := b.weight(blk + "ssm_a")
	// ggml_ssm_scan packs y {d_inner, n_tokens} and the final states
	// {d_state, d_inner, n_seqs} in one F32 tensor.
	sDim := int64(r.m.Layers[il].SDim)
	sCache := b.cache(il, "cache_s", gguf.TypeF32, sDim*r.nRS)
	yssm := r.buildRS(sCache, sDim, func(states, ids *tensor) *tensor {
		return b.SSMScan(b.Reshape(states, d.state, headDim, d.heads, r.nRS), x, dt, A, bc[0], bc[1], ids)
	})
	b.Expand(b.Cpy(b.View(yssm, d.state*d.inner*S), b.View(sCache, d.state*d.inner*S)))
	y := b.Add(b.View(yssm, headDim, d.heads, T, S), b.Mul(x, b.weight(blk+"ssm_d")))
	y = b.GLU(b.Cont(z), y)
	if b.has(blk + "ssm_norm.weight") {
		y = b.norm(b.Reshape(y, d.inner/d.groups, d.groups, T, S), blk+"ssm_norm.weight")
	}
	return b.MulMat(b.weight(blk+"ssm_out.weight"), b.Reshape(y, d.inner, T*S))
}

// shortConv is LFM2's build_shortconv_block: a gated depthwise convolution
// over the last l_cache inputs, whose state is the previous l_cache-1.
func (r *rsGraph) shortConv(il int, cur *tensor) *tensor {
	b := r.b
	blk := blkName(il)
	embd := int64(r.m.NEmbd)
	T, S := r.nSeqTokens, r.nSeqs
	dConv := int64(r.m.Layers[il].RDim) / embd
	bcx := b.MulMat(b.weight(blk+"shortconv.in_proj.weight"), b.Reshape(cur, embd, T, S))
	v := r.columns(bcx, 3, embd) // b, c and x
	cat := r.convState(il, dConv+1, embd, b.Mul(v[0], v[2]))
	y := b.Mul(v[1], b.SSMConv(cat, b.weight(blk+"shortconv.conv.weight")))
	return b.Reshape(b.MulMat(b.weight(blk+"shortconv.out_proj.weight"), y), embd, T*S)
}

// attention is a hybrid's attention block for layer il on its normed
// input cur: the Q, K and V projections, their per-head norms and RoPE
// where the model has them, build_attn on the KV cache and the output
// projection.
func (r *rsGraph) attention(il int, cur *tensor) *tensor {
	b := r.b
	blk := blkName(il)
	s := layerShape(r.m, r.m.Layers[il], r.c, r.kv, r.tokens())
	q, k, v := b.qkv(blk, cur, s)
	if r.qkNorm {
		q, k = b.norm(q, blk+"attn_q_norm.weight"), b.norm(k, blk+"attn_k_norm.weight")
	}
	if r.rope {
		q, k = b.Rope(q, r.pos, nil), b.Rope(k, r.pos, nil)
	}
	return b.attnOut(blk, b.attn(il, r.c, r.kv, s, q, k, v, attnOpts{}))
}

// output is the final norm and the LM head. With rowsAfter every row
// goes through the final norm (embeddings_nextn_masked is false) and the
// outputs are selected after it; the norm is then the seed of a draft
// head (t_h_nextn), a graph output the allocator never frees, whether or
// not a draft runs.
func (r *rsGraph) output(inpL *tensor, norm string, rowsAfter bool) *ggml.Graph {
	b := r.b
	cur := b.norm(inpL, norm)
	if rowsAfter {
		cur = b.GetRows(cur.SetOutput(), r.outIDs)
	}
	cur.SetOutput()
	b.embd = cur
	return b.finish(b.MulMat(b.weight("output.weight", int64(r.m.NEmbd), int64(r.m.NVocab)), cur))
}
