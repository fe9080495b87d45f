package ggml

import "github.com/headroom-llm/headroom/gguf"

// This file is ggml_backend_cuda_graph_optimize (ggml-cuda.cu, which the
// ROCm build compiles too) as it bears on memory. The CUDA backend does
// not reorder a split unless GGML_CUDA_GRAPH_OPT=1 (off by default), but
// before that it asks the scheduler to keep the tensors of the runs it
// fuses alive until the run ends (add_alloc_dep): the allocator then
// cannot reuse them inside the run, and the compute buffer holds them
// side by side.
//
//   - The MoE weighted reduction (both modeled builds; llama.cpp PR
//     #25952): build_moe_ffn's MUL of the experts' outputs by their router
//     weights, the per-expert views and the chain of ADDs that sums them
//     are one kernel, which reads the unweighted outputs and the weights
//     until the last ADD. Without the dependency the MUL runs in place
//     over the experts' outputs; with it, both tensors of n_embd x
//     n_expert_used x n_tokens floats are alive at once.
//   - The top-k MoE selection (v0.5.0): softmax or sigmoid, argsort,
//     get_rows and the weights' normalization and scale are one kernel,
//     and every node of the run and every source of one is kept until
//     the node after the run.

// maxReduceExperts is MOE_WEIGHTED_REDUCTION_MAX_EXPERTS: the fused
// reduction spans 2k+1 nodes and ggml_can_fuse_subgraph takes at most 31.
const maxReduceExperts = 15

// cudaDeps returns the allocation dependencies ggml-cuda adds to the split
// of nodes [start, end): reduce is the MoE weighted reduction's, topK
// v0.5.0's top-k MoE selection's.
func cudaDeps(nodes []*Tensor, start, end int, topK, reduce bool) []AllocDep {
	var deps []AllocDep
	split := nodes[start:end]
	for i := 0; i < len(split); i++ {
		if reduce {
			if d, n, ok := moeReduce(split, i); ok {
				deps = append(deps, d)
				i += n - 1
			}
		}
		if !topK {
			continue
		}
		if n := topKRun(split, i); n > 0 && start+i+n < len(nodes) {
			// Everything in the run and everything it reads, until the
			// node after it (add_alloc_deps(i, i + ops.size()), whose
			// last index is one past the run).
			d := AllocDep{Until: nodes[start+i+n]}
			for _, t := range split[i : i+n] {
				d.Keep = append(d.Keep, t)
				for _, s := range t.src {
					if s != nil {
						d.Keep = append(d.Keep, s)
					}
				}
			}
			deps = append(deps, d)
			i += n - 1
		}
	}
	return deps
}

// contiguous approximates ggml_is_contiguous with what the graph
// descriptions record: permuted, transposed and strided views are not.
func contiguous(t *Tensor) bool {
	return contiguousRows(t) && t.span == 0
}

// moeReduce is ggml_cuda_match_moe_weighted_reduction at node i: a MUL
// (or two: the experts by a scale, then by the router weights) of f32
// contiguous tensors, one view per expert of the weighted tensor, and the
// ADDs that sum the views in order. It returns the dependency (the
// unweighted experts, the scale and the weights, kept until the last ADD)
// and the run's length. The views are checked by shape and source: the
// graph descriptions lay them out as build_moe_ffn does (row stride of
// the token dimension, offset of one expert row each).
func moeReduce(nodes []*Tensor, i int) (AllocDep, int, bool) {
	first := nodes[i]
	if !f32Contiguous(first, Mul) {
		return AllocDep{}, 0, false
	}
	weighted, mulCount := first, 1
	var experts, scale, weights *Tensor
	if i+1 < len(nodes) {
		second := nodes[i+1]
		if f32Contiguous(second, Mul) {
			scaled, route, ok := splitMul(second)
			raw, sc, ok2 := splitMul(first)
			if ok && ok2 && scaled == first {
				weighted, experts, scale, weights, mulCount = second, raw, sc, route, 2
			}
		}
	}
	if experts == nil {
		var ok bool
		if experts, weights, ok = splitMul(first); !ok {
			return AllocDep{}, 0, false
		}
	}
	ne := weighted.layout.ne
	nUsed, nTok := ne[1], max(ne[2], 1)*max(ne[3], 1)
	if nUsed < 2 || nUsed > maxReduceExperts {
		return AllocDep{}, 0, false
	}
	count := int(2*nUsed) + mulCount - 1
	if i+count > len(nodes) {
		return AllocDep{}, 0, false
	}
	var views []*Tensor
	var prev *Tensor
	adds := 0
	for _, c := range nodes[i+mulCount : i+count] {
		if c.op == View {
			cn := c.layout.ne
			if len(views) >= int(nUsed) || len(c.src) == 0 || c.src[0] != weighted || c.view != weighted ||
				c.layout.typ != gguf.TypeF32 || cn[0] != ne[0] || cn[1] != nTok || max(cn[2], 1) != 1 || max(cn[3], 1) != 1 {
				return AllocDep{}, 0, false
			}
			views = append(views, c)
			continue
		}
		if c.op != Add || len(views) < 2 || adds+1 >= len(views) {
			return AllocDep{}, 0, false
		}
		lhs := prev
		if adds == 0 {
			lhs = views[0]
		}
		if len(c.src) < 2 || c.src[0] != lhs || c.src[1] != views[adds+1] || c.layout.typ != gguf.TypeF32 {
			return AllocDep{}, 0, false
		}
		prev = c
		adds++
	}
	if len(views) != int(nUsed) || adds != int(nUsed)-1 || prev == nil || !contiguous(prev) {
		return AllocDep{}, 0, false
	}
	if pn := prev.layout.ne; pn[0] != ne[0] || pn[1] != nTok || max(pn[2], 1) != 1 || max(pn[3], 1) != 1 {
		return AllocDep{}, 0, false
	}
	idx := make([]int, count)
	for k := range idx {
		idx[k] = i + k
	}
	if !canFuseSubgraph(nodes, idx, i+count-1) {
		return AllocDep{}, 0, false
	}
	d := AllocDep{Until: prev, Keep: []*Tensor{experts}}
	if scale != nil {
		d.Keep = append(d.Keep, scale)
	}
	d.Keep = append(d.Keep, weights)
	return d, count, true
}

func f32Contiguous(t *Tensor, op Op) bool {
	return t.op == op && t.cls != leaf && !t.external && t.layout.typ == gguf.TypeF32 && contiguous(t)
}

// splitMul tells a weighting MUL's operands apart: the full tensor of the
// MUL's shape and the broadcast one of a single column (1 x n_used x
// tokens), either way round.
func splitMul(mul *Tensor) (full, bcast *Tensor, ok bool) {
	if len(mul.src) < 2 {
		return nil, nil, false
	}
	ne := mul.layout.ne
	isWeights := func(t *Tensor) bool {
		n := t.layout.ne
		return t != nil && t.layout.typ == gguf.TypeF32 && contiguous(t) && n[0] == 1 && n[1] == ne[1] &&
			max(n[2], 1) == max(ne[2], 1) && max(n[3], 1) == max(ne[3], 1)
	}
	isExperts := func(t *Tensor) bool {
		return t != nil && t.layout.typ == gguf.TypeF32 && contiguous(t) && sameShape(t.layout.ne, ne)
	}
	a, b := mul.src[0], mul.src[1]
	switch {
	case isExperts(a) && isWeights(b):
		return a, b, true
	case isExperts(b) && isWeights(a):
		return b, a, true
	}
	return nil, nil, false
}

func sameShape(a, b [4]int64) bool {
	for i := range 4 {
		if max(a[i], 1) != max(b[i], 1) {
			return false
		}
	}
	return true
}

// topKRun is what v0.5.0's graph_optimize fuses of a top-k MoE selection
// starting at node i (ggml_cuda_topk_moe_fusion, then the op list it
// builds, ggml_can_fuse_subgraph and ggml_cuda_should_use_topk_moe): the
// run's length, 0 for none. A selection whose softmax comes after the
// argsort (gpt-oss) adds no dependency.
func topKRun(nodes []*Tensor, i int) int {
	n := len(nodes)
	at := func(k int, op Op) bool { return k < n && nodes[k].op == op }
	g := nodes[i]
	var ops []Op
	switch {
	case g.op == SoftMax:
		ops = []Op{SoftMax}
	case g.op == Unary && g.unary == UnarySigmoid:
		ops = []Op{Unary}
	default:
		// SOFTPLUS then SQRT (DeepSeek-V4) is recorded by no replayed
		// architecture; ARGSORT first is the delayed softmax.
		return 0
	}
	probs := i + len(ops) - 1
	k := probs + 1
	if !at(k, Reshape) || nodes[k].src[0] != nodes[probs] {
		return 0
	}
	reshaped := nodes[k]
	k++
	bias := at(k, Add) && nodes[k].src[0] == nodes[probs]
	if bias {
		k++
	}
	if !at(k, Argsort) {
		return 0
	}
	if want := nodes[probs]; bias {
		want = nodes[k-1]
		if nodes[k].src[0] != want {
			return 0
		}
	} else if nodes[k].src[0] != want {
		return 0
	}
	k++
	if !at(k, View) || nodes[k].src[0] != nodes[k-1] {
		return 0
	}
	ids := k
	k++
	if !at(k, GetRows) || nodes[k].src[0] != reshaped || nodes[k].src[1] != nodes[k-1] {
		return 0
	}
	k++
	if bias {
		ops = append(ops, Reshape, Add, Argsort, View, GetRows)
	} else {
		ops = append(ops, Reshape, Argsort, View, GetRows)
	}
	// The normalization, only whole (RESHAPE, SUM_ROWS, CLAMP, DIV,
	// RESHAPE), then a SCALE of what came last.
	if k < n && normRun(nodes, k) {
		ops = append(ops, Reshape, SumRows, Clamp, Div, Reshape)
		k += 5
	}
	if at(k, Scale) && nodes[k].src[0] == nodes[k-1] {
		ops = append(ops, Scale)
	}
	idx := make([]int, len(ops))
	for j := range idx {
		idx[j] = i + j
		if i+j >= n || nodes[i+j].op != ops[j] {
			return 0
		}
	}
	weights := i + len(ops) - 1
	if !canFuseSubgraph(nodes, idx, ids, weights) {
		return 0
	}
	// ggml_cuda_should_use_topk_moe: a kernel exists for the expert count
	// (a power of two up to 512, or 288 or 576) and the logits and
	// weights are contiguous.
	experts := reshaped.layout.ne[1]
	if (experts&(experts-1) != 0 || experts > 512) && experts != 288 && experts != 576 {
		return 0
	}
	if !contiguous(nodes[weights]) || len(g.src) == 0 || !contiguous(g.src[0]) {
		return 0
	}
	return len(ops)
}

// normRun says whether the nodes from k are the weights' normalization:
// RESHAPE, SUM_ROWS, CLAMP, each of the one before, a DIV of the RESHAPE
// by the CLAMP, and a RESHAPE of the DIV.
func normRun(nodes []*Tensor, k int) bool {
	if k+5 > len(nodes) {
		return false
	}
	for j, op := range []Op{Reshape, SumRows, Clamp} {
		if nodes[k+j].op != op || nodes[k+j].src[0] != nodes[k+j-1] {
			return false
		}
	}
	d, r := nodes[k+3], nodes[k+4]
	return d.op == Div && len(d.src) == 2 && d.src[1] == nodes[k+2] && d.src[0] == nodes[k] &&
		r.op == Reshape && r.src[0] == d
}
