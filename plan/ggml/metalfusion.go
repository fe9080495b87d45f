package ggml

import (
	"slices"

	"github.com/headroom-llm/headroom/gguf"
)

// This file is v0.5.0's Metal fusion table (ggml-metal-fusion.cpp) as it
// bears on memory: the graph optimizer packs what the table fuses before
// it reorders (ggml_metal_fusion_max), and, before that, keeps every
// source of a run whose ops match a pattern alive until the run's last
// node (ggml_metal_fusion_add_alloc_deps), matching ops alone. The snake
// activation (MUL, SIN, SQR, MUL, ADD) holds an op no replayed
// architecture records and is left out.

// metalKind names what a pattern's check is.
type metalKind uint8

const (
	mfNorm metalKind = iota
	mfNormScale
	mfAddChain
	mfGDNCache
	mfTopK
	mfMoEReduce
	mfConvSiLU
)

// metalFusion is one entry of the table: the ops as the graph records
// them (views included) and, derived, the ops that compute.
type metalFusion struct {
	kind   metalKind
	opsAll []Op
	ops    []Op
	// outs are the other outputs, by position in ops.
	outs []int
	// unsafe: the chain and subgraph checks are skipped; the pattern's
	// own check decides.
	unsafe bool
}

func metalFusions() []metalFusion {
	adds := func(n int) []Op { return slices.Repeat([]Op{Add}, n) }
	reduce := func(n int) []Op {
		ops := []Op{Mul}
		ops = append(ops, slices.Repeat([]Op{View}, n)...)
		return append(ops, adds(n-1)...)
	}
	topK := []Op{SoftMax, Reshape, Argsort, View, GetRows}
	norm := []Op{Reshape, SumRows, Clamp, Div, Reshape}
	fs := []metalFusion{
		{kind: mfNorm, opsAll: []Op{Norm, Mul}},
		{kind: mfNorm, opsAll: []Op{Norm, Mul, Add}},
		{kind: mfNormScale, opsAll: []Op{Norm, Scale}},
		{kind: mfNorm, opsAll: []Op{RMSNorm, Mul}},
		{kind: mfNorm, opsAll: []Op{RMSNorm, Mul, Add}},
		{kind: mfNormScale, opsAll: []Op{RMSNorm, Scale}},
	}
	for n := 2; n <= 7; n++ {
		fs = append(fs, metalFusion{kind: mfAddChain, opsAll: adds(n)})
	}
	fs = append(fs,
		metalFusion{kind: mfGDNCache, opsAll: []Op{GatedDeltaNet, Cpy}, unsafe: true},
		metalFusion{kind: mfTopK, opsAll: topK, outs: []int{1}, unsafe: true},
		metalFusion{kind: mfTopK, opsAll: append(slices.Clone(topK), Scale), outs: []int{1}, unsafe: true},
		metalFusion{kind: mfTopK, opsAll: append(slices.Clone(topK), norm...), outs: []int{1}, unsafe: true},
		metalFusion{kind: mfTopK, opsAll: append(append(slices.Clone(topK), norm...), Scale), outs: []int{1}, unsafe: true},
	)
	for n := 2; n <= metalMaxReduce; n++ {
		fs = append(fs, metalFusion{kind: mfMoEReduce, opsAll: reduce(n), unsafe: true})
	}
	fs = append(fs, metalFusion{kind: mfConvSiLU, opsAll: []Op{SSMConv, Unary}})
	for i := range fs {
		for _, op := range fs[i].opsAll {
			if !op.empty() {
				fs[i].ops = append(fs[i].ops, op)
			}
		}
	}
	return fs
}

// metalMaxReduce is GGML_METAL_MOE_REDUCE_MAX_EXPERTS.
const metalMaxReduce = 8

// metalFusionDeps is ggml_metal_fusion_add_alloc_deps: at each node, the
// longest pattern whose ops the nodes from there are, by op alone; every
// source of the run is kept until its last node.
func metalFusionDeps(fs []metalFusion, nodes []*Tensor) []AllocDep {
	var deps []AllocDep
	for i := 0; i < len(nodes); i++ {
		best := 0
		for _, f := range fs {
			if len(f.opsAll) > best && opsAt(nodes, i, f.opsAll) {
				best = len(f.opsAll)
			}
		}
		if best == 0 {
			continue
		}
		run := nodes[i : i+best]
		d := AllocDep{Until: run[best-1]}
		for j, t := range run {
			for _, s := range t.src {
				if s != nil && !slices.Contains(d.Keep, s) && !slices.Contains(run[:j], s) {
					d.Keep = append(d.Keep, s)
				}
			}
		}
		deps = append(deps, d)
		i += best - 1
	}
	return deps
}

func opsAt(nodes []*Tensor, i int, ops []Op) bool {
	if i+len(ops) > len(nodes) {
		return false
	}
	for j, op := range ops {
		if nodes[i+j].op != op {
			return false
		}
	}
	return true
}

// metalPack is v0.5.0's packing: from each node, the patterns of the
// table chained back to back over the nodes that compute (ggml_metal_
// fusion_max), the views between them packed along; at most 16 nodes
// that compute.
func metalPack(fs []metalFusion, nodes []*Tensor, out []metalNode) []metalNode {
	for i := 0; i < len(nodes); i++ {
		mn := metalNode{at: int32(i), n: 1}
		if f := metalFusionMax(fs, nodes, i); f > 1 {
			mn.n = int32(f)
			i += f - 1
		}
		out = append(out, mn)
	}
	return out
}

// metalFusionMax is ggml_metal_fusion_max: how many nodes from idx are
// packed into one.
func metalFusionMax(fs []metalFusion, nodes []*Tensor, idx int) int {
	if nodes[idx].op.empty() {
		return 1
	}
	var buf [metalMaxFuse]int
	idxs := buf[:0]
	for i := idx; i < len(nodes) && len(idxs) < metalMaxFuse; i++ {
		if !nodes[i].op.empty() {
			idxs = append(idxs, i)
		}
	}
	total, at := 0, 0
	for at < len(idxs) && total < metalMaxFuse {
		n := metalFusionNext(fs, nodes, idxs, at)
		if n == 0 || total+n > metalMaxFuse {
			break
		}
		total += n
		at += n
	}
	if at == 0 {
		return 1
	}
	return min(metalMaxFuse, idxs[at-1]-idx+1)
}

// metalFusionNext is ggml_metal_fusion_next in the optimizer's mode: the
// length (in nodes that compute) of the longest pattern starting at
// idxs[at], 0 for none.
func metalFusionNext(fs []metalFusion, nodes []*Tensor, idxs []int, at int) int {
	best := 1
	for _, f := range fs {
		n := len(f.ops)
		if n <= best || at+n > len(idxs) {
			continue
		}
		ok := true
		for j := 0; j < n && ok; j++ {
			ok = nodes[idxs[at+j]].op == f.ops[j]
		}
		if !ok {
			continue
		}
		var runBuf [metalMaxFuse]*Tensor
		run := runBuf[:n]
		for j := range n {
			run[j] = nodes[idxs[at+j]]
		}
		if !f.unsafe {
			for j := 1; j < n && ok; j++ {
				ok = readsPrev(run[j], run[j-1])
			}
			var outBuf [2]int
			outs := append(outBuf[:0], idxs[at+n-1])
			for _, o := range f.outs {
				outs = append(outs, idxs[at+o])
			}
			if !ok || !canFuseSubgraph(nodes, idxs[at:at+n], outs...) {
				continue
			}
		}
		if !f.check(nodes, run, idxs[at]) {
			continue
		}
		best = n
	}
	if best == 1 {
		return 0
	}
	return best
}

// check is the pattern's own check, in the optimizer's (structural)
// mode: run holds the nodes that compute, start is the first one's index.
func (f metalFusion) check(nodes []*Tensor, run []*Tensor, start int) bool {
	switch f.kind {
	case mfNorm:
		for j := 1; j < len(run); j++ {
			w := run[j].src
			if len(w) < 2 || w[0] != run[j-1] || w[1].layout.ne[0] != run[0].layout.ne[0] ||
				!contiguousRows(w[1]) || run[j].layout.typ != gguf.TypeF32 {
				return false
			}
		}
		return true
	case mfNormScale:
		s := run[1]
		return s.op == Scale && len(s.src) > 0 && s.src[0] == run[0] && s.layout.typ == gguf.TypeF32
	case mfAddChain:
		for j := 1; j < len(run); j++ {
			a, b := run[j], run[j-1]
			if len(a.src) < 2 || len(b.src) < 2 || a.src[0] != b || a.src[1].layout != b.src[1].layout ||
				a.src[1].span != b.src[1].span {
				return false
			}
		}
		return true
	case mfGDNCache:
		return gdnCacheFuses(run[0], run[1])
	case mfTopK:
		return f.topKFuses(nodes, run, start)
	case mfMoEReduce:
		return f.reduceFuses(nodes, start)
	case mfConvSiLU:
		c, u := run[0], run[1]
		return u.unary == UnarySiLU && len(u.src) > 0 && u.src[0] == c && c.layout.typ == gguf.TypeF32 &&
			u.layout.typ == gguf.TypeF32 && contiguousRows(u)
	}
	return false
}

// gdnCacheFuses is ggml_metal_fusion_check_gdn_cache: the gated delta
// net's state snapshot copied into the recurrent cache, neither an
// output. The graph descriptions record the copy's source as a view of
// the net's output; its offset and the cache view's strides are those of
// build_delta_net's write, which the check also requires.
func gdnCacheFuses(gdn, cpy *Tensor) bool {
	if gdn.layout.typ != gguf.TypeF32 || gdn.output || cpy.op != Cpy || cpy.output || len(cpy.src) < 2 {
		return false
	}
	s := cpy.src[0]
	return s.op == View && s.view == gdn && s.span == 0 && cpy.src[1].layout.typ == gguf.TypeF32
}

// topKFuses is ggml_metal_fusion_check_topk_moe: softmax (plain, no mask
// or sinks), the top-k argsort and its view, get_rows of the
// probabilities and, by the pattern, the normalization and a scale; at
// most 1024 experts. The ids view's strides are build_moe_ffn's.
func (f metalFusion) topKFuses(nodes []*Tensor, run []*Tensor, start int) bool {
	n := len(f.ops)
	withNorm, withScale := n >= 6, n == 4 || n == 7
	end := start
	for k, c := start, 0; c < n; k++ {
		if !nodes[k].op.empty() {
			c++
			end = k
		}
	}
	if withNorm && !withScale {
		if end+1 >= len(nodes) || nodes[end+1].op != Reshape || nodes[end+1].src[0] != nodes[end] {
			return false
		}
		end++
	}
	if end-start+1 != len(f.opsAll) || !opsAt(nodes, start, f.opsAll) {
		return false
	}
	sm, probs, as, ids, gr, out := nodes[start], nodes[start+1], nodes[start+2], nodes[start+3], nodes[start+4], nodes[end]
	if len(sm.src) == 0 || len(sm.src) > 1 && sm.src[1] != nil || len(sm.src) > 2 && sm.src[2] != nil {
		return false
	}
	logits := sm.src[0]
	if logits.layout.typ != gguf.TypeF32 || sm.layout.typ != gguf.TypeF32 || out.layout.typ != gguf.TypeF32 ||
		ids.layout.typ != gguf.TypeI32 {
		return false
	}
	ln, in, on := logits.layout.ne, ids.layout.ne, out.layout.ne
	experts, tokens, used := ln[0], ln[1], in[0]
	if experts <= 0 || tokens <= 0 || used <= 0 || used > experts || experts > 1024 ||
		max(ln[2], 1) != 1 || max(ln[3], 1) != 1 || in[1] != tokens || max(in[2], 1) != 1 ||
		on[0] != 1 || on[1] != used || on[2] != tokens || max(on[3], 1) != 1 {
		return false
	}
	if !contiguous(logits) || !contiguous(out) {
		return false
	}
	if probs.src[0] != sm || as.src[0] != sm || ids.src[0] != as || gr.src[0] != probs || gr.src[1] != ids {
		return false
	}
	if withNorm {
		wr, sr, cl, dv, or := nodes[start+5], nodes[start+6], nodes[start+7], nodes[start+8], nodes[start+9]
		if wr.src[0] != gr || sr.src[0] != wr || cl.src[0] != sr || dv.src[0] != wr || dv.src[1] != cl || or.src[0] != dv {
			return false
		}
		if withScale && nodes[start+10].src[0] != or {
			return false
		}
	} else if withScale && nodes[start+5].src[0] != gr {
		return false
	}
	raw := make([]int, end-start+1)
	for k := range raw {
		raw[k] = start + k
	}
	return canFuseSubgraph(nodes, raw, start+3, end)
}

// reduceFuses is ggml_metal_fusion_match_moe_reduce: build_moe_ffn's MUL
// of the experts by their weights, one view per expert, the ADDs that sum
// them, as many experts as the pattern has. The views' offsets and
// strides are build_moe_ffn's, which the graph descriptions follow.
func (f metalFusion) reduceFuses(nodes []*Tensor, start int) bool {
	raw := len(f.opsAll)
	used := raw / 2
	if start+raw > len(nodes) || !opsAt(nodes, start, f.opsAll) {
		return false
	}
	mul := nodes[start]
	if mul.layout.typ != gguf.TypeF32 || len(mul.src) < 2 {
		return false
	}
	views := 0
	for start+1+views < len(nodes) && nodes[start+1+views].op == View {
		views++
	}
	if views != used {
		return false
	}
	experts, weights, dst := mul.src[0], mul.src[1], nodes[start+raw-1]
	if experts.layout.typ != gguf.TypeF32 || weights.layout.typ != gguf.TypeF32 || dst.layout.typ != gguf.TypeF32 {
		return false
	}
	en, wn, dn := experts.layout.ne, weights.layout.ne, dst.layout.ne
	embd, tokens := en[0], en[2]
	if embd <= 0 || tokens <= 0 || en[1] != int64(used) || max(en[3], 1) != 1 ||
		wn[0] != 1 || wn[1] != int64(used) || wn[2] != tokens || max(wn[3], 1) != 1 ||
		dn[0] != embd || dn[1] != tokens || max(dn[2], 1) != 1 || max(dn[3], 1) != 1 {
		return false
	}
	if !contiguous(experts) || !contiguous(weights) || !contiguous(dst) {
		return false
	}
	for i := 1; i <= used; i++ {
		v := nodes[start+i]
		if v.view != mul || v.src[0] != mul || v.layout.ne[0] != embd || v.layout.ne[1] != tokens {
			return false
		}
	}
	var prev *Tensor
	for j := 1; j < used; j++ {
		add, rhs := nodes[start+used+j], nodes[start+j+1]
		lhs := prev
		if j == 1 {
			lhs = nodes[start+1]
		}
		if add.src[0] != lhs || add.src[1] != rhs {
			return false
		}
		prev = add
	}
	idx := make([]int, raw)
	for k := range idx {
		idx[k] = start + k
	}
	return canFuseSubgraph(nodes, idx, start+raw-1)
}
