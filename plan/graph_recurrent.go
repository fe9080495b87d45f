package plan

import (
	"strconv"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
)

// This file describes the graphs llama.cpp builds for recurrent and hybrid
// models: Mamba-2 (src/models/mamba.cpp with llm_graph_context_mamba's
// build_mamba2_layer), and the hybrids that reuse that layer. The recurrent
// state lives in the rs buffer, a cache outside the graph like the KV
// cache: build_rs gathers the states of the micro-batch's sequences with
// get_rows, the layer runs ggml_ssm_conv and ggml_ssm_scan, and ggml_cpy
// writes the final states back into views of the cache.

// recurrentBuilder returns the graph builder for mamba2, lfm2, nemotron_h, granitehybrid and falcon-h1: recurrent and hybrid models; nil for a model it does not describe.
func recurrentBuilder(m *arch.Model) graphBuilder {
	if m.NExpert > 0 || m.MLA || m.Window > 0 {
		return nil
	}
	// mixer says which block each layer runs: 'M' a Mamba-2 mixer, 'A'
	// attention, 'C' LFM2's short convolution, 'F' an MLP only
	// (Nemotron-H), 'P' attention and Mamba-2 in parallel (Falcon-H1).
	mixer := make([]byte, len(m.Layers))
	shapes := tensorShapes(m)
	for il, l := range m.Layers {
		attn := l.Attention == arch.Full && l.HeadsKV > 0 && l.KDim == l.VDim && m.NHead > 0 && l.KDim%l.HeadsKV == 0
		switch {
		case m.Arch == "mamba2" && l.Recurrent && l.Attention == arch.NoAttention:
			mixer[il] = 'M'
		case m.Arch == "lfm2" && l.Recurrent && l.Attention == arch.NoAttention && l.FF > 0:
			mixer[il] = 'C'
		case m.Arch == "lfm2" && !l.Recurrent && attn && l.FF > 0:
			mixer[il] = 'A'
		case (m.Arch == "nemotron_h" || m.Arch == "granitehybrid") && l.Recurrent && l.Attention == arch.NoAttention:
			mixer[il] = 'M'
		case (m.Arch == "nemotron_h" || m.Arch == "granitehybrid") && !l.Recurrent && attn:
			mixer[il] = 'A'
		case m.Arch == "nemotron_h" && !l.Recurrent && l.Attention == arch.NoAttention && l.FF > 0:
			mixer[il] = 'F'
		case m.Arch == "falcon-h1" && l.Recurrent && attn:
			mixer[il] = 'P'
		default:
			return nil
		}
		if mixer[il] == 'M' || mixer[il] == 'P' {
			if _, ok := recurrentMamba2Dims(m, shapes, il); !ok {
				return nil
			}
		}
		if !recurrentHasLayerTensors(m, il, mixer[il]) {
			return nil
		}
	}
	return func(m *arch.Model, c Context, nTokens int, b *gb) *graph {
		return recurrentGraphOf(m, c, nTokens, b, mixer)
	}
}

// recurrentHasLayerTensors checks that layer il holds the weights its
// block reads, and no bias or extra weight the description leaves out.
func recurrentHasLayerTensors(m *arch.Model, il int, mixer byte) bool {
	blk := "blk." + strconv.Itoa(il) + "."
	names := map[string]bool{}
	for _, t := range m.Tensors {
		if t.Layer == il {
			names[t.Name] = true
		}
	}
	need := []string{"attn_norm.weight"}
	switch mixer {
	case 'A', 'P':
		need = append(need, "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight")
	case 'C':
		need = append(need, "shortconv.conv.weight", "shortconv.in_proj.weight", "shortconv.out_proj.weight")
	case 'F':
		need = append(need, "ffn_up.weight", "ffn_down.weight")
	}
	switch {
	case m.Arch == "lfm2":
		need = append(need, "ffn_norm.weight", "ffn_up.weight", "ffn_gate.weight", "ffn_down.weight")
		if mixer == 'A' {
			need = append(need, "attn_q_norm.weight", "attn_k_norm.weight")
		}
	case m.Arch == "granitehybrid":
		need = append(need, "ffn_norm.weight", "ffn_up.weight", "ffn_gate.weight", "ffn_down.weight")
	case m.Arch == "falcon-h1":
		need = append(need, "ffn_norm", "ffn_up.weight", "ffn_gate.weight", "ffn_down.weight")
	}
	for _, n := range need {
		if !names[blk+n] {
			return false
		}
	}
	for _, n := range []string{"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias", "ffn_up.bias", "ffn_gate.bias", "ffn_down.bias", "ffn_gate_inp.weight", "rope_freqs.weight"} {
		if names[blk+n] {
			return false
		}
	}
	return true
}

// recurrentSSM holds one Mamba-2 mixer's sizes (llama_hparams ssm_*), read
// back from its tensors' shapes.
type recurrentSSM struct {
	conv, inner, state, heads, groups int64
	inProj                            int64 // ssm_in's output width
}

// recurrentMamba2Dims reads layer il's Mamba-2 sizes from its tensors:
// ssm_conv1d is {d_conv, d_inner + 2*n_group*d_state}, ssm_norm
// {d_inner/n_group, n_group}, ssm_a {1, n_head}, ssm_in {n_embd, d_in_proj};
// it checks them against the layer's state sizes (n_embd_r, n_embd_s).
func recurrentMamba2Dims(m *arch.Model, shapes map[string][]uint64, il int) (recurrentSSM, bool) {
	var d recurrentSSM
	blk := "blk." + strconv.Itoa(il) + "."
	conv, norm, a, in := shapes[blk+"ssm_conv1d.weight"], shapes[blk+"ssm_norm.weight"], shapes[blk+"ssm_a"], shapes[blk+"ssm_in.weight"]
	if len(conv) != 2 || len(norm) != 2 || len(a) < 1 || len(in) != 2 {
		return d, false
	}
	for _, n := range []string{"ssm_conv1d.bias", "ssm_dt.bias", "ssm_d", "ssm_out.weight"} {
		if _, ok := shapes[blk+n]; !ok {
			return d, false
		}
	}
	d.conv = int64(conv[0])
	d.groups = int64(norm[1])
	d.inner = int64(norm[0]) * d.groups
	d.heads = int64(a[len(a)-1])
	d.inProj = int64(in[1])
	channels := int64(conv[1])
	if d.groups <= 0 || d.heads <= 0 || d.conv < 1 || (channels-d.inner)%(2*d.groups) != 0 || d.inner%d.heads != 0 {
		return d, false
	}
	d.state = (channels - d.inner) / (2 * d.groups)
	l := m.Layers[il]
	if int64(l.RDim) != (d.conv-1)*channels || int64(l.SDim) != d.state*d.inner || d.inProj != 2*d.inner+2*d.groups*d.state+d.heads {
		return d, false
	}
	return d, true
}

// recurrentGraph builds the shared parts of a recurrent graph: the
// micro-batch's split into sequences and build_rs_inp's state-copy input.
type recurrentGraph struct {
	b *gb
	m *arch.Model
	// nSeqs sequences of nSeqTokens tokens each (llama_ubatch); nRS is the
	// number of state cells the full reserve context copies (its size).
	nSeqs, nSeqTokens, nRS int64
	// nOut is the rows kept past the output selection.
	nOut                  int64
	sCopyMain, sCopyExtra *gtensor
	outIDs                *gtensor
}

// newRecurrentGraph sets up the micro-batch as graph_reserve does: the
// prompt graph splits n_ubatch tokens over one sequence per stream (all
// n_seq_max without a unified cache), the generation graph one token per
// sequence.
func newRecurrentGraph(m *arch.Model, c Context, nTokens int, b *gb) *recurrentGraph {
	b.init(m)
	b.g.kinds = true
	seqs := int64(max(c.NStream, 1))
	T := int64(nTokens)
	if T%seqs != 0 {
		T = (T + seqs - 1) / seqs * seqs
	}
	r := &recurrentGraph{b: b, m: m, nSeqs: seqs, nSeqTokens: T / seqs, nRS: int64(max(1, c.NSeq)), nOut: c.outputRows(T)}
	return r
}

// rsInput is build_rs_inp: one I32 index per state cell, viewed as the
// cells of the batch's sequences and the other ones.
func (r *recurrentGraph) rsInput() {
	sCopy := r.b.input("s_copy", gguf.TypeI32, [4]int64{r.nRS})
	r.sCopyMain = r.b.view("s_copy_main", sCopy, [4]int64{r.nSeqs})
	r.sCopyExtra = r.recurrentView("s_copy_extra", sCopy, 1, [4]int64{r.nRS - r.nSeqs})
	r.sCopyExtra.layout.typ = gguf.TypeI32
	r.sCopyMain.layout.typ = gguf.TypeI32
}

// recurrentView is gb.view of a tensor of dims dimensions that may be
// empty: build_rs's copies of the cells outside the batch are empty in the
// reserve graph.
func (r *recurrentGraph) recurrentView(name string, v *gtensor, dims int, ne [4]int64, src ...*gtensor) *gtensor {
	t := r.b.view(name, v, ne, src...)
	t.layout.ne = recurrentNE(dims, ne)
	return t
}

// recurrentF32 is gb.f32 for a tensor of dims dimensions that may be
// empty (zero bytes).
func (r *recurrentGraph) recurrentF32(name string, op gop, dims int, ne [4]int64, src ...*gtensor) *gtensor {
	t := r.b.f32(name, op, ne, src...)
	t.layout.ne = recurrentNE(dims, ne)
	if t.layout.ne[0]*t.layout.ne[1]*t.layout.ne[2]*t.layout.ne[3] == 0 {
		t.bytes = 0
	}
	return t
}

// recurrentNE sets the dimensions past the first dims to 1, keeping zeros
// among the first.
func recurrentNE(dims int, ne [4]int64) [4]int64 {
	for i := dims; i < len(ne); i++ {
		ne[i] = 1
	}
	return ne
}

// cpy is ggml_cpy(src, dst): a node that is a view of its destination,
// here a slice of a state cache, which it writes.
func (r *recurrentGraph) cpy(name string, src, dst *gtensor) *gtensor {
	t := r.b.view(name, dst, dst.layout.ne)
	t.src = []*gtensor{src, dst}
	t.layout = dst.layout
	return t
}

// buildRS is llm_graph_context::build_rs on a state cache s of stateSize
// floats per cell: clear the zeroed cell in place, gather the batch's
// states (with rows, or get_rows by default), and copy the states of the
// other cells (none in the reserve graph).
func (r *recurrentGraph) buildRS(s *gtensor, stateSize int64, rows func(states, ids *gtensor) *gtensor) *gtensor {
	b := r.b
	states := b.view("states", s, [4]int64{stateSize, r.nRS})
	zero := b.view("state_zero", states, [4]int64{stateSize})
	// ggml_scale_inplace: a view of the cache that the scheduler runs
	// where the cache lives.
	clear := b.view("state_zero_scale", zero, [4]int64{stateSize})
	clear.dev, clear.inplace = s.home, true
	b.g.expand(clear)
	var out *gtensor
	if rows != nil {
		out = rows(states, r.sCopyMain)
	} else {
		out = b.f32("state_rows", opOther, [4]int64{stateSize, r.nSeqs}, states, r.sCopyMain)
		out.gather = true
	}
	b.g.expand(out)
	extra := r.recurrentF32("states_extra", opOther, 2, [4]int64{stateSize, r.nRS - r.nSeqs}, states, r.sCopyExtra)
	extra.gather = true
	dst := r.recurrentView("states_extra_dst", s, 1, [4]int64{stateSize * (r.nRS - r.nSeqs)})
	b.g.expand(r.cpy("states_extra_cpy", extra, dst))
	return out
}

// mamba2Layer is build_mamba2_layer for layer il on its normed input cur
// {n_embd, n_tokens}; it returns the mixer's output {n_embd, n_tokens}.
func (r *recurrentGraph) mamba2Layer(il int, cur *gtensor, d recurrentSSM) *gtensor {
	b := r.b
	blk := "blk." + strconv.Itoa(il) + "."
	embd := int64(r.m.NEmbd)
	T, S := r.nSeqTokens, r.nSeqs
	headDim := d.inner / d.heads
	channels := d.inner + 2*d.groups*d.state
	l := r.m.Layers[il]
	rCache := b.cache(il, "cache_r", [4]int64{int64(l.RDim) * r.nRS})
	sCache := b.cache(il, "cache_s", [4]int64{int64(l.SDim) * r.nRS})

	conv := r.buildRS(rCache, int64(l.RDim), nil)
	conv = b.view("conv_3d", conv, [4]int64{d.conv - 1, channels, S})
	// The projection runs on the 2D input and is reshaped after it, and
	// the output projection on the 2D y, as the engine's
	// build_mamba2_layer has them: the nodes and their order are what the
	// Vulkan reorder walks.
	zx := as(kMulMat, b.f32("zxBCdt", opOther, [4]int64{d.inProj, T * S}, b.weight(blk+"ssm_in.weight", [4]int64{embd, d.inProj}), cur))
	zx = b.view("zxBCdt_3d", zx, [4]int64{d.inProj, T, S})
	// The views into zxBCdt and conv_x keep their parents' row strides:
	// a copy of one to another backend holds everything from its first
	// element to its last (ggml_nbytes), most of the parent.
	zxRow := d.inProj * 4
	z := strided(b.view("z", zx, [4]int64{headDim, d.heads, T, S}), [4]int64{4, headDim * 4, zxRow, zxRow * T})
	xBC := strided(b.view("xBC", zx, [4]int64{channels, T, S}), [4]int64{4, zxRow, zxRow * T})
	dt := strided(b.view("dt", zx, [4]int64{d.heads, T, S}), [4]int64{4, zxRow, zxRow * T})

	// conv_x = concat(state, transpose(xBC)) along the time axis.
	convX := b.f32("conv_x", opOther, [4]int64{d.conv - 1 + T, channels, S}, conv, b.view("xBC_t", xBC, [4]int64{T, channels, S}))
	convRow := (d.conv - 1 + T) * 4
	last := strided(b.view("last_conv", convX, [4]int64{d.conv - 1, channels, S}), [4]int64{4, convRow, convRow * channels})
	b.g.expand(r.cpy("conv_store", last, b.view("conv_state_dst", rCache, [4]int64{(d.conv - 1) * channels * S})))
	xBC = as(kSSMConv, b.f32("ssm_conv", opOther, [4]int64{channels, T, S}, convX, b.weight(blk+"ssm_conv1d.weight", [4]int64{d.conv, channels})))
	xBC = as(kAdd, b.f32("ssm_conv_b", opInplace, xBC.layout.ne, xBC, b.weight(blk+"ssm_conv1d.bias", [4]int64{channels})))
	xBC = as(kUnary, b.f32("ssm_conv_silu", opInplace, xBC.layout.ne, xBC))

	xRow := channels * 4
	x := strided(b.view("x", xBC, [4]int64{headDim, d.heads, T, S}), [4]int64{4, headDim * 4, xRow, xRow * T})
	B := strided(b.view("B", xBC, [4]int64{d.state, d.groups, T, S}), [4]int64{4, d.state * 4, xRow, xRow * T})
	C := strided(b.view("C", xBC, [4]int64{d.state, d.groups, T, S}), [4]int64{4, d.state * 4, xRow, xRow * T})
	dt = b.f32("dt_cont", opOther, [4]int64{d.heads, T, S}, dt)
	dt = as(kAdd, b.f32("dt_b", opInplace, dt.layout.ne, dt, b.weight(blk+"ssm_dt.bias", [4]int64{d.heads})))
	A := b.weight(blk+"ssm_a", [4]int64{1, d.heads})

	// ggml_ssm_scan packs y {d_inner, n_tokens} and the final states
	// {d_state, d_inner, n_seqs} in one F32 tensor.
	yssm := r.buildRS(sCache, int64(l.SDim), func(states, ids *gtensor) *gtensor {
		ssm := b.view("ssm", states, [4]int64{d.state, headDim, d.heads, r.nRS})
		return b.f32("ssm_scan", opOther, [4]int64{d.inner*T*S + d.state*d.inner*S}, ssm, x, dt, A, B, C, ids)
	})
	stateOut := b.view("ssm_state_out", yssm, [4]int64{d.state * d.inner * S})
	b.g.expand(r.cpy("ssm_store", stateOut, b.view("ssm_state_dst", sCache, [4]int64{d.state * d.inner * S})))

	y := b.view("y", yssm, [4]int64{headDim, d.heads, T, S})
	dx := recurrentNoOffload(as(kMul, b.f32("y_d", opInplace, x.layout.ne, x, b.weight(blk+"ssm_d", [4]int64{1, d.heads}))))
	y = as(kAdd, b.f32("mamba2_y_add_d", opInplace, y.layout.ne, y, dx))
	zc := b.f32("z_cont", opOther, z.layout.ne, z)
	y = b.f32("y_swiglu", opOther, y.layout.ne, zc, y)
	if b.has(blk + "ssm_norm.weight") {
		y = b.view("y_groups", y, [4]int64{d.inner / d.groups, d.groups, T, S})
		y = as(kRMSNorm, b.f32("ssm_norm_rms", opInplace, y.layout.ne, y))
		y = recurrentNoOffload(as(kMul, b.f32("ssm_norm", opInplace, y.layout.ne, y, b.weight(blk+"ssm_norm.weight", [4]int64{d.inner / d.groups, d.groups}))))
	}
	y = b.view("y_2d", y, [4]int64{d.inner, T * S})
	return as(kMulMat, b.f32("ssm_out", opOther, [4]int64{embd, T * S}, b.weight(blk+"ssm_out.weight", [4]int64{d.inner, embd}), y))
}

// strided gives an f32 view the byte strides nb of the tensor it views
// and records its span, ggml_nbytes: ne[0] elements and (ne[i]-1)
// strides of every further dimension.
func strided(v *gtensor, nb [4]int64) *gtensor {
	ne := v.layout.ne
	span := ne[0] * nb[0]
	for i := 1; i < 4; i++ {
		if ne[i] > 1 {
			span += (ne[i] - 1) * nb[i]
		}
	}
	v.span, v.kind = span, kView // ggml_view_*
	return v
}

// embed is build_inp_embd, as in llamaGraphOn.
func (r *recurrentGraph) embed() *gtensor {
	b := r.b
	T := r.nSeqs * r.nSeqTokens
	embd := int64(r.m.NEmbd)
	tokens := b.input("inp_tokens", gguf.TypeI32, [4]int64{T})
	tokEmbd := b.weight("token_embd.weight", [4]int64{embd, int64(r.m.NVocab)})
	vecEmbd := b.input("inp_embd", gguf.TypeF32, [4]int64{embd, T})
	inpL := b.f32("embd", opOther, [4]int64{embd, T}, tokEmbd, tokens)
	inpL.gather = true
	b.g.expand(inpL)
	b.g.expand(vecEmbd)
	return inpL
}

// rmsNorm is build_norm with LLM_NORM_RMS and a weight.
func (r *recurrentGraph) rmsNorm(name string, x *gtensor, weight string) *gtensor {
	cur := as(kRMSNorm, r.b.f32(name+"_rms", opInplace, x.layout.ne, x))
	return recurrentNoOffload(as(kMul, r.b.f32(name, opInplace, x.layout.ne, cur, r.b.weight(weight, [4]int64{x.layout.ne[0]}))))
}

// recurrentNoOffload marks an op on a host weight that a GPU does not take
// by op offload: Vulkan's offload_op wants ne[1] >= 32 (the batch), which
// ops on per-head or per-group rows (ne[1] = heads or groups) miss. The
// scheduler model's gather flag says exactly that.
func recurrentNoOffload(t *gtensor) *gtensor {
	if t.layout.ne[1] < 32 {
		t.gather = true
	}
	return t
}

// output is the final norm and the LM head on the last layer's output.
func (r *recurrentGraph) output(inpL *gtensor, norm string) *graph {
	b := r.b
	T := r.nOut
	embd := int64(r.m.NEmbd)
	cur := r.rmsNorm("result_norm", inpL, norm)
	if r.m.Arch == "nemotron_h" || r.m.Arch == "qwen3next" {
		// Nemotron-H keeps every row to the end (embeddings_nextn_masked
		// is false) and selects the outputs after the final norm. The
		// norm itself is the seed of a draft head (t_h_nextn), a graph
		// output the allocator never frees, whether or not a draft runs.
		cur.output = true
		cur = b.f32("result_norm_rows", opOther, [4]int64{embd, T}, cur, r.outIDs)
	}
	cur.output = true
	logits := as(kMulMat, b.f32("result_output", opOther, [4]int64{int64(r.m.NVocab), T}, b.weight("output.weight", [4]int64{embd, int64(r.m.NVocab)}), cur))
	logits.output = true
	b.g.expand(logits)
	return &b.g
}

// recurrentGraphOf builds the graph of the model's architecture, mixer
// giving each layer's block (see recurrentBuilder): src/models/mamba.cpp,
// lfm2.cpp, nemotron-h.cpp, granite-hybrid.cpp and falcon-h1.cpp.
func recurrentGraphOf(m *arch.Model, c Context, nTokens int, b *gb, mixer []byte) *graph {
	r := newRecurrentGraph(m, c, nTokens, b)
	T := r.nSeqs * r.nSeqTokens
	embd := int64(m.NEmbd)
	last := len(m.Layers) - 1
	inpL := r.embed()
	r.rsInput()
	var in *recurrentAttnInputs
	if m.Arch != "mamba2" {
		in = r.attnInputs(c)
	}
	outIDs := b.input("inp_out_ids", gguf.TypeI32, [4]int64{r.nOut})
	r.outIDs = outIDs
	rows := func(name string, x *gtensor) *gtensor {
		return b.f32(name, opOther, [4]int64{embd, r.nOut}, x, outIDs)
	}
	outputNorm := "output_norm.weight"
	for il := range m.Layers {
		blk := "blk." + strconv.Itoa(il) + "."
		inpSA := inpL
		// n is the rows past the last layer's output selection (all of
		// them elsewhere, and in Nemotron-H, which selects after the
		// final norm).
		n := T
		if il == last && m.Arch != "nemotron_h" {
			n = r.nOut
		}
		switch m.Arch {
		case "mamba2":
			d, _ := recurrentMamba2Dims(m, b.shapes, il)
			cur := r.rmsNorm("attn_norm", inpL, blk+"attn_norm.weight")
			cur = r.mamba2Layer(il, cur, d)
			if il == last {
				cur, inpSA = rows("get_rows_cur", cur), rows("get_rows_inp", inpSA)
			}
			inpL = as(kAdd, b.f32("l_out", opInplace, [4]int64{embd, n}, cur, inpSA))
		case "lfm2":
			outputNorm = "token_embd_norm.weight"
			cur := r.rmsNorm("operator_norm", inpL, blk+"attn_norm.weight")
			if mixer[il] == 'C' {
				cur = r.shortConv(il, cur)
			} else {
				q, k, v := r.qkv(il, cur)
				q = r.rmsNorm("q_norm", q, blk+"attn_q_norm.weight")
				k = r.rmsNorm("k_norm", k, blk+"attn_k_norm.weight")
				cur = r.attention(il, c, in, r.rope("Qcur_rope", q, in.pos), r.rope("Kcur_rope", k, in.pos), v)
			}
			if il == last {
				cur, inpSA = rows("get_rows_cur", cur), rows("get_rows_inp", inpSA)
			}
			cur = as(kAdd, b.f32("ffn_inp", opInplace, [4]int64{embd, n}, inpSA, cur))
			ffn := r.ffn(il, r.rmsNorm("ffn_norm", cur, blk+"ffn_norm.weight"), false)
			inpL = as(kAdd, b.f32("l_out", opInplace, [4]int64{embd, n}, cur, ffn))
		case "nemotron_h", "granitehybrid":
			cur := r.rmsNorm("attn_norm", inpL, blk+"attn_norm.weight")
			switch mixer[il] {
			case 'M':
				d, _ := recurrentMamba2Dims(m, b.shapes, il)
				cur = r.mamba2Layer(il, cur, d)
			case 'A':
				// Nemotron-H never ropes Q and K; Granite does when
				// rope_finetuned, which llama.cpp defaults to true for it
				// (rope.scaling.finetuned absent).
				q, k, v := r.qkv(il, cur)
				if m.Arch == "granitehybrid" {
					q, k = r.rope("Qcur_rope", q, in.pos), r.rope("Kcur_rope", k, in.pos)
				}
				cur = r.attention(il, c, in, q, k, v)
			case 'F':
				cur = r.ffn(il, cur, true)
			}
			if il == last && m.Arch != "nemotron_h" {
				cur, inpSA = rows("get_rows_cur", cur), rows("get_rows_inp", inpSA)
			}
			if m.Arch == "nemotron_h" {
				inpL = as(kAdd, b.f32("block_out", opInplace, [4]int64{embd, T}, cur, inpSA))
				continue
			}
			ffnInp := as(kAdd, b.f32("ffn_inp", opInplace, [4]int64{embd, n}, cur, inpSA))
			ffn := r.ffn(il, r.rmsNorm("ffn_norm", ffnInp, blk+"ffn_norm.weight"), false)
			inpL = as(kAdd, b.f32("l_out", opInplace, [4]int64{embd, n}, ffn, ffnInp))
		case "falcon-h1":
			d, _ := recurrentMamba2Dims(m, b.shapes, il)
			cur := r.rmsNorm("attn_norm", inpL, blk+"attn_norm.weight")
			q, k, v := r.qkv(il, cur)
			attnOut := r.attention(il, c, in, r.rope("Qcur_rope", q, in.pos), r.rope("Kcur_rope", k, in.pos), v)
			cur = r.rmsNorm("ssm_in", inpL, blk+"attn_norm.weight")
			ssmOut := r.mamba2Layer(il, cur, d)
			cur = as(kAdd, b.f32("layer_out", opInplace, [4]int64{embd, T}, attnOut, ssmOut))
			inpSA = as(kAdd, b.f32("ffn_inp", opInplace, [4]int64{embd, T}, cur, inpSA))
			if il == last {
				// The rows of cur are taken but never used, so they are
				// not part of the graph.
				inpSA = rows("get_rows_inp", inpSA)
			}
			ffn := r.ffn(il, r.rmsNorm("ffn_norm", inpSA, blk+"ffn_norm"), false)
			inpL = as(kAdd, b.f32("l_out", opInplace, [4]int64{embd, n}, ffn, inpSA))
		}
	}
	return r.output(inpL, outputNorm)
}
