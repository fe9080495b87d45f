package plan

import (
	"strconv"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
)

// gb builds graph descriptions with ggml's shapes and sizes.
type gb struct {
	g     graph
	cpu   string
	homes map[string]home // weights by GGUF name
	kvDev []string        // each layer's KV cache device
	// layerDev is where each layer runs, and ropeFreqs the RoPE factor
	// copies made so far (ropeFactors).
	layerDev  []string
	ropeFreqs []*gtensor
	weights   map[string]*gtensor // by name, see weight
	// shapes are the model's tensor shapes by name; builderFor builds
	// them once for every graph a builder describes.
	shapes map[string][]uint64
	// mem holds the graph's tensors; a caller that replays many graphs
	// passes one arena and resets it between them.
	mem *arena
}

// home is where a weight lives and its real size.
type home struct {
	device string
	bytes  int64
}

func elems(ne [4]int64) int64 {
	n := int64(1)
	for _, d := range ne {
		if d > 0 {
			n *= d
		}
	}
	return n
}

// tensor makes a tensor of type t and shape ne (trailing zeros mean 1).
func (b *gb) tensor(name string, t gguf.GGMLType, op gop, ne [4]int64, src ...*gtensor) *gtensor {
	return b.tensorOwning(name, t, op, ne, b.srcs(src, nil))
}

// tensorOwning is tensor with a source list the tensor may keep.
func (b *gb) tensorOwning(name string, t gguf.GGMLType, op gop, ne [4]int64, src []*gtensor) *gtensor {
	for i := range ne {
		if ne[i] == 0 {
			ne[i] = 1
		}
	}
	var row int64
	if t == gguf.TypeF32 {
		row = 4 * ne[0] // most tensors; RowSize's table lookup is not free
	} else {
		r, _ := t.RowSize(uint64(ne[0]))
		row = int64(r)
	}
	x := b.alloc()
	x.name, x.bytes, x.op, x.src = name, row*ne[1]*ne[2]*ne[3], op, src
	x.layout = layout{typ: t, ne: ne}
	return x
}

// as records t's ggml op (see vkorder.go) and returns t.
func as(k ggmlOp, t *gtensor) *gtensor {
	t.kind = k
	return t
}

// alloc hands out a zeroed tensor from the builder's arena.
func (b *gb) alloc() *gtensor {
	if b.mem == nil {
		b.mem = &arena{}
	}
	return b.mem.tensor()
}

// srcs copies first (when not nil) and then rest into a source list from
// the builder's arena. The list's capacity is its length, so appending to
// it never writes into the next tensor's.
func (b *gb) srcs(rest []*gtensor, first *gtensor) []*gtensor {
	n := len(rest)
	if first != nil {
		n++
	}
	if n == 0 {
		return nil
	}
	if b.mem == nil {
		b.mem = &arena{}
	}
	out := b.mem.list(n)
	if first != nil {
		out[0] = first
		copy(out[1:], rest)
	} else {
		copy(out, rest)
	}
	return out
}

func (b *gb) f32(name string, op gop, ne [4]int64, src ...*gtensor) *gtensor {
	return b.tensorOwning(name, gguf.TypeF32, op, ne, b.srcs(src, nil))
}

// view makes a view (reshape, permute, transpose, a cache slice) of v.
func (b *gb) view(name string, v *gtensor, ne [4]int64, src ...*gtensor) *gtensor {
	// Like ggml, the viewed tensor is the view's first source, so its
	// last use is counted through the view.
	t := b.tensorOwning(name, gguf.TypeF32, opView, ne, b.srcs(src, v))
	t.view, t.bytes = v, 0
	if v.op == opView && v.view != nil {
		t.view = v.view // ggml views always point at the owner of the memory
	}
	return t
}

// setRows is ggml_set_rows(dst, rows, idx): a view of dst (whose memory
// it writes) with its sources in ggml's order, {rows, idx, dst}, so that
// the rows and indices are recorded before a reshape of the destination
// (ggml_visit_parents follows that order).
func (b *gb) setRows(name string, dst, rows, idx *gtensor) *gtensor {
	t := b.view(name, dst, dst.layout.ne, rows, idx)
	t.src[0], t.src[1], t.src[2] = rows, idx, dst
	t.layout.typ = dst.layout.typ
	return as(kSetRows, t)
}

func (b *gb) input(name string, t gguf.GGMLType, ne [4]int64) *gtensor {
	x := b.tensor(name, t, opNone, ne)
	x.input = true
	return x
}

// weight is a tensor held in a model buffer: external to the graph. Its
// home is where the accountant placed it, when the graph is replayed for
// a device split.
func (b *gb) weight(name string, ne [4]int64) *gtensor {
	// One tensor per weight, however many ops read it (Falcon-H1 norms
	// its input twice with attn_norm): the scheduler copies a tensor to a
	// backend once, and a second copy would be a split input of its own.
	if w := b.weights[name]; w != nil {
		return w
	}
	if b.weights == nil {
		b.weights = make(map[string]*gtensor, len(b.shapes))
	}
	w := b.newWeight(name, ne)
	b.weights[name] = w
	return w
}

// newWeight is weight without the sharing: a tensor of its own.
func (b *gb) newWeight(name string, ne [4]int64) *gtensor {
	w := b.f32(name, opNone, ne)
	w.external = true
	if h, ok := b.homes[name]; ok {
		w.home, w.bytes, w.isWeight = h.device, h.bytes, true
	} else {
		w.home = b.cpu
	}
	return w
}

// init indexes the model's tensors for has and shape, unless the builder
// already did; every builder calls it first.
func (b *gb) init(m *arch.Model) {
	if b.shapes == nil {
		b.shapes = tensorShapes(m)
	}
}

// tensorShapes maps the model's tensor names to their shapes.
func tensorShapes(m *arch.Model) map[string][]uint64 {
	out := make(map[string][]uint64, len(m.Tensors))
	for _, t := range m.Tensors {
		out[t.Name] = t.Shape
	}
	return out
}

// fileWeight is the weight of that name with its shape in the file.
func (b *gb) fileWeight(name string) *gtensor {
	var ne [4]int64
	for i, d := range b.shapes[name] {
		if i < 4 {
			ne[i] = int64(d)
		}
	}
	return b.weight(name, ne)
}

// reserveTokens is the reserve graph's token count, which
// llama_context::graph_reserve rounds up to a multiple of the sequences
// (each gets as many tokens), and its output rows, which it does not:
// min(n_tokens, n_outputs_max).
func reserveTokens(c Context, nTokens int) (T, nOut int64) {
	nSeq := int64(max(c.NSeq, 1))
	return (int64(nTokens) + nSeq - 1) / nSeq * nSeq, c.outputRows(int64(nTokens))
}

// has reports whether the model has a tensor of that name.
func (b *gb) has(name string) bool {
	_, ok := b.shapes[name]
	return ok
}

// ropeFactors is layer il's RoPE frequency factors (rope_freqs), which
// llama's graph passes to RoPE, or nil when the model has none or is of
// another family. llama.cpp creates the tensor for every layer but keeps
// one copy per buffer type (TENSOR_DUPLICATED): the layers in host memory
// share one, the layers on a GPU another.
func (b *gb) ropeFactors(m *arch.Model, il int) *gtensor {
	const name = "rope_freqs.weight"
	shape, ok := b.shapes[name]
	if m.Arch != "llama" || !ok || len(shape) != 1 {
		return nil
	}
	dev := b.cpu
	if il < len(b.layerDev) {
		dev = b.layerDev[il]
	}
	for _, t := range b.ropeFreqs {
		if t.home == dev {
			return t
		}
	}
	t := b.newWeight(name, [4]int64{int64(shape[0])})
	t.home = dev
	b.ropeFreqs = append(b.ropeFreqs, t)
	return t
}

// cache is a layer's K or V cache tensor, on the layer's KV device.
func (b *gb) cache(il int, name string, ne [4]int64) *gtensor {
	w := b.f32(name, opNone, ne)
	w.external = true
	w.home = b.cpu
	if il < len(b.kvDev) {
		w.home = b.kvDev[il]
	}
	return w
}

// llamaGraph describes the graph llama.cpp builds for a dense transformer
// of the llama family (src/models/llama.cpp with llm_graph_context's
// build_attn and build_ffn) for one micro-batch of nTokens against a full
// cache, in the order ggml records it.
// attnShape is one attention layer's shape in the graph: query and KV
// heads, the K and V head sizes, the cells per stream, the streams and the
// micro-batch's tokens.
type attnShape struct {
	heads, headsKV, headK, headV int64
	nKV, streams, T              int64
}

// kvAttention is the part of build_attn shared by every cache-backed
// attention: q, k and v, already expanded, are written into layer il's
// cache through kIdx and vIdx, the cache is viewed per stream, and
// attention runs (flash, or kq, soft max and kqv), with the sinks as a
// last source where the model has them. It returns the heads merged into
// one row per token, expanded.
func (b *gb) kvAttention(il int, c Context, s attnShape, q, k, v, kIdx, vIdx, mask, sinks *gtensor) *gtensor {
	heads, headsKV, headK, headV := s.heads, s.headsKV, s.headK, s.headV
	nKV, streams, T := s.nKV, s.streams, s.T
	cacheK := b.cache(il, "cache_k", [4]int64{headK * headsKV, nKV, streams})
	cacheV := b.cache(il, "cache_v", [4]int64{headV * headsKV, nKV, streams})
	// cpy_k and cpy_v: with several streams the cache is merged into one
	// 2D tensor (the indices are global); a transposed V is written one
	// element per row, through reshapes of the rows and of the cache.
	// These reshapes are nodes, which the Vulkan reorder counts.
	// Without k and v (a layer reading another layer's cache, Gemma 3n's
	// last ones) nothing is written.
	dstK, dstV := cacheK, cacheV
	if streams > 1 && k != nil {
		dstK = b.view("k_merged", cacheK, [4]int64{headK * headsKV, nKV * streams})
	}
	if k != nil {
		b.g.expand(b.setRows("k_set_rows", dstK, as(kView, b.view("k_2d", k, [4]int64{headK * headsKV, T})), kIdx))
	}
	var vRows *gtensor
	switch {
	case v == nil:
	case c.VTrans:
		v2d := b.view("v_2d", v, [4]int64{headV * headsKV, T})
		vRows = b.view("v_cur_elems", v2d, [4]int64{1, headV * headsKV * T})
		dstV = b.view("v_elems", cacheV, [4]int64{1, headV * headsKV * nKV * streams})
	default:
		vRows = as(kView, b.view("v_2d", v, [4]int64{headV * headsKV, T}))
		if streams > 1 {
			dstV = b.view("v_merged", cacheV, [4]int64{headV * headsKV, nKV * streams})
		}
	}
	if vRows != nil {
		b.g.expand(b.setRows("v_set_rows", dstV, vRows, vIdx))
	}
	kView := b.view("k_view", cacheK, [4]int64{headK, headsKV, nKV, streams})
	vView := b.view("v_view", cacheV, [4]int64{headV, headsKV, nKV, streams})
	q4 := b.view("q_streams", q, [4]int64{headK, heads, T / streams, streams})
	qp := b.view("q_perm", q4, [4]int64{headK, T / streams, heads, streams})
	kp := b.view("k_perm", kView, [4]int64{headK, nKV, headsKV, streams})
	vp := b.view("v_perm", vView, [4]int64{headV, nKV, headsKV, streams})
	var cur *gtensor
	if c.Flash {
		src := []*gtensor{qp, kp, vp, mask}
		if sinks != nil {
			src = append(src, sinks)
		}
		fa := b.f32("fattn", opOther, [4]int64{headV, heads, T / streams, streams}, src...)
		cur = b.view("fattn_2d", fa, [4]int64{headV * heads, T})
	} else {
		kq := as(kMulMat, b.f32("kq", opOther, [4]int64{nKV, T / streams, heads, streams}, kp, qp))
		src := []*gtensor{kq, mask}
		if sinks != nil {
			src = append(src, sinks)
		}
		kq = b.f32("kq_soft_max", opInplace, kq.layout.ne, src...)
		kqv := as(kMulMat, b.f32("kqv", opOther, [4]int64{headV, T / streams, heads, streams}, vp, kq))
		perm := b.view("kqv_perm", kqv, [4]int64{headV, heads, T / streams, streams})
		cur = b.f32("kqv_out", opOther, [4]int64{headV * heads, T}, perm)
	}
	b.g.expand(cur)
	return cur
}

func llamaGraph(m *arch.Model, c Context, nTokens int) *graph {
	return llamaGraphOn(m, c, nTokens, &gb{cpu: "CPU"})
}

// llamaGraphOn builds the graph with b's placement of weights and caches.
func llamaGraphOn(m *arch.Model, c Context, nTokens int, b *gb) *graph {
	b.init(m)
	b.g.kinds = true
	T, nOut := reserveTokens(c, nTokens)
	nKV := int64(c.NCtxSeq)
	streams := int64(c.NStream)
	embd := int64(m.NEmbd)

	tokens := b.input("inp_tokens", gguf.TypeI32, [4]int64{T})
	tokEmbd := b.weight("token_embd.weight", [4]int64{embd, int64(m.NVocab)})
	// build_inp_embd records two inputs, token ids and ready-made
	// embeddings, and selects one (ggml_build_forward_select). The vector
	// input is a graph leaf that nothing consumes, so the allocator places
	// it first and never frees it.
	vecEmbd := b.input("inp_embd", gguf.TypeF32, [4]int64{embd, T})
	inpL := b.f32("embd", opOther, [4]int64{embd, T}, tokEmbd, tokens)
	inpL.gather = true
	b.g.expand(inpL)
	b.g.expand(vecEmbd)
	pos := b.input("inp_pos", gguf.TypeI32, [4]int64{T})
	// With flash attention the mask is made in F16 directly.
	maskType := gguf.TypeF32
	if c.Flash {
		maskType = gguf.TypeF16
	}
	kqMask := b.input("kq_mask", maskType, [4]int64{nKV, T / streams, 1, streams})
	kIdx := b.input("k_idxs", gguf.TypeI64, [4]int64{T})
	// A transposed V cache is written element by element, so it takes an
	// index per element rather than per row.
	vIdxN := T
	if c.VTrans {
		vIdxN = T * int64(maxVDim(m))
	}
	vIdx := b.input("v_idxs", gguf.TypeI64, [4]int64{vIdxN})
	// A quantized cache is written and read through Hadamard rotations
	// (see swaCacheInputs).
	kv := swaKV{kIdx: kIdx, vIdx: vIdx, mask: kqMask}
	quant := func(t gguf.GGMLType) bool { i, _ := t.Info(); return i.Quantized }
	hk, hv := uniformHeads(m)
	if quant(c.TypeK) && hk > 0 && hk%64 == 0 {
		n := swaRotSize(hk)
		kv.kRot = b.input("k_rot", gguf.TypeF32, [4]int64{n, n})
	}
	if quant(c.TypeV) && hv > 0 && hv%64 == 0 {
		kv.vRot = b.input("v_rot", gguf.TypeF32, [4]int64{64, 64})
	}
	outIDs := b.input("inp_out_ids", gguf.TypeI32, [4]int64{nOut})

	for il, l := range m.Layers {
		heads := int64(m.NHead)
		headsKV := int64(l.HeadsKV)
		headK := int64(l.KDim) / max(headsKV, 1)
		headV := int64(l.VDim) / max(headsKV, 1)
		inpSA := inpL
		blk := "blk." + strconv.Itoa(il) + "."
		// OLMo 2 norms after attention and after the FFN instead of
		// before (src/models/olmo2.cpp), and Q and K whole, before the
		// heads are split.
		olmo2 := m.Arch == "olmo2"
		rmsNorm := func(name string, x *gtensor, weight string) *gtensor {
			n := as(kRMSNorm, b.f32("norm", opInplace, x.layout.ne, x))
			return as(kMul, b.f32(name, opInplace, x.layout.ne, n, b.weight(weight, [4]int64{x.layout.ne[0]})))
		}
		cur := inpL
		if !olmo2 {
			cur = rmsNorm("attn_norm", inpL, blk+"attn_norm.weight")
		}
		q := as(kMulMat, b.f32("Qcur", opOther, [4]int64{heads * headK, T}, b.weight(blk+"attn_q.weight", [4]int64{embd, heads * headK}), cur))
		k := as(kMulMat, b.f32("Kcur", opOther, [4]int64{headsKV * headK, T}, b.weight(blk+"attn_k.weight", [4]int64{embd, headsKV * headK}), cur))
		v := as(kMulMat, b.f32("Vcur", opOther, [4]int64{headsKV * headV, T}, b.weight(blk+"attn_v.weight", [4]int64{embd, headsKV * headV}), cur))
		if b.has(blk + "attn_q.bias") { // qwen2: projections with biases
			q = as(kAdd, b.f32("Qcur_b", opInplace, q.layout.ne, q, b.weight(blk+"attn_q.bias", [4]int64{heads * headK})))
			k = as(kAdd, b.f32("Kcur_b", opInplace, k.layout.ne, k, b.weight(blk+"attn_k.bias", [4]int64{headsKV * headK})))
			v = as(kAdd, b.f32("Vcur_b", opInplace, v.layout.ne, v, b.weight(blk+"attn_v.bias", [4]int64{headsKV * headV})))
		}
		if olmo2 {
			q = rmsNorm("Qcur_normed", q, blk+"attn_q_norm.weight")
			k = rmsNorm("Kcur_normed", k, blk+"attn_k_norm.weight")
		}
		q = b.view("Qcur_3d", q, [4]int64{headK, heads, T})
		k = b.view("Kcur_3d", k, [4]int64{headK, headsKV, T})
		v = b.view("Vcur_3d", v, [4]int64{headV, headsKV, T})
		if !olmo2 && b.has(blk+"attn_q_norm.weight") { // qwen3: per-head RMS norms of Q and K
			q = as(kRMSNorm, b.f32("Qcur_normed", opInplace, q.layout.ne, q))
			q = as(kMul, b.f32("Qcur_norm", opInplace, q.layout.ne, q, b.weight(blk+"attn_q_norm.weight", [4]int64{headK})))
			k = as(kRMSNorm, b.f32("Kcur_normed", opInplace, k.layout.ne, k))
			k = as(kMul, b.f32("Kcur_norm", opInplace, k.layout.ne, k, b.weight(blk+"attn_k_norm.weight", [4]int64{headK})))
		}
		// Llama 3's frequency factors are RoPE's third source: no node
		// allocates for them, but the scheduler copies them like any
		// weight, and a weight from another backend ends a split.
		rope := []*gtensor{q, pos}
		if rf := b.ropeFactors(m, il); rf != nil {
			rope = append(rope, rf)
		}
		q = as(kRope, b.f32("Qcur_rope", opInplace, [4]int64{headK, heads, T}, rope...))
		rope[0] = k
		k = as(kRope, b.f32("Kcur_rope", opInplace, [4]int64{headK, headsKV, T}, rope...))
		if kv.kRot != nil {
			q = b.swaRotate(q, kv.kRot, false)
			k = b.swaRotate(k, kv.kRot, false)
		}
		if kv.vRot != nil {
			v = b.swaRotate(v, kv.vRot, false)
		}
		// build_attn expands K last, so that RoPE on K can be fused with
		// the write into the cache.
		b.g.expand(q)
		b.g.expand(v)
		b.g.expand(k)
		cur = b.kvAttention(il, c, attnShape{heads, headsKV, headK, headV, nKV, streams, T}, q, k, v, kIdx, vIdx, kqMask, nil)
		if kv.vRot != nil {
			cur = b.swaRotate(cur, kv.vRot, false)
		}
		cur = as(kMulMat, b.f32("attn_out", opOther, [4]int64{embd, T}, b.weight(blk+"attn_output.weight", [4]int64{heads * headV, embd}), cur))
		rows := T
		if il == len(m.Layers)-1 {
			rows = nOut
			cur = b.f32("get_rows_cur", opOther, [4]int64{embd, rows}, cur, outIDs)
			inpSA = b.f32("get_rows_inp", opOther, [4]int64{embd, rows}, inpSA, outIDs)
		}
		if olmo2 {
			cur = rmsNorm("attn_post_norm", cur, blk+"post_attention_norm.weight")
		}
		ffnInp := as(kAdd, b.f32("ffn_inp", opInplace, [4]int64{embd, rows}, cur, inpSA))
		cur = ffnInp
		if !olmo2 {
			cur = rmsNorm("ffn_norm", ffnInp, blk+"ffn_norm.weight")
		}
		ff := int64(l.FF)
		up := as(kMulMat, b.f32("ffn_up", opOther, [4]int64{ff, rows}, b.weight(blk+"ffn_up.weight", [4]int64{embd, ff}), cur))
		gate := as(kMulMat, b.f32("ffn_gate", opOther, [4]int64{ff, rows}, b.weight(blk+"ffn_gate.weight", [4]int64{embd, ff}), cur))
		act := b.f32("ffn_swiglu", opOther, [4]int64{ff, rows}, gate, up)
		cur = as(kMulMat, b.f32("ffn_out", opOther, [4]int64{embd, rows}, b.weight(blk+"ffn_down.weight", [4]int64{ff, embd}), act))
		if olmo2 {
			cur = rmsNorm("ffn_post_norm", cur, blk+"post_ffw_norm.weight")
		}
		cur = as(kAdd, b.f32("l_out", opInplace, [4]int64{embd, rows}, cur, ffnInp))
		inpL = cur
	}
	cur := as(kRMSNorm, b.f32("norm", opInplace, [4]int64{embd, nOut}, inpL))
	cur = as(kMul, b.f32("result_norm", opInplace, [4]int64{embd, nOut}, cur, b.weight("output_norm.weight", [4]int64{embd})))
	cur.output = true
	logits := as(kMulMat, b.f32("result_output", opOther, [4]int64{int64(m.NVocab), nOut}, b.weight("output.weight", [4]int64{embd, int64(m.NVocab)}), cur))
	logits.output = true
	b.g.expand(logits)
	return &b.g
}

func maxVDim(m *arch.Model) int {
	n := 0
	for _, l := range m.Layers {
		n = max(n, l.VDim)
	}
	return n
}

// uniformHeads is every layer's K and V head size when all layers share
// them, else 0: llama.cpp rotates a quantized cache only then.
func uniformHeads(m *arch.Model) (k, v int64) {
	k, v = -1, -1
	for _, l := range m.Layers {
		if l.Attention == arch.NoAttention {
			continue // no cache of its own (recurrent, or reading another layer's)
		}
		hk, hv := int64(l.KDim/max(l.HeadsKV, 1)), int64(l.VDim/max(l.HeadsKV, 1))
		if k == -1 {
			k, v = hk, hv
		}
		if hk != k {
			k = 0
		}
		if hv != v {
			v = 0
		}
	}
	return max(k, 0), max(v, 0)
}
