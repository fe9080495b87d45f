package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file checks that a recurrent or hybrid model is one whose graph
// headroom describes (src/models/mamba.cpp, lfm2.cpp, nemotron-h.cpp,
// granite-hybrid.cpp and falcon-h1.cpp, each in a file of its own):
// which block each layer runs, and that the layer holds exactly the
// tensors that block reads.

// mixer is the block a layer of a recurrent or hybrid model runs on its
// normed input.
type mixer uint8

const (
	noMixer      mixer = iota
	mixMamba2          // a Mamba-2 mixer (build_mamba2_layer)
	mixAttention       // attention over the KV cache
	mixShortConv       // LFM2's gated short convolution
	mixMLP             // an MLP and nothing else (Nemotron-H)
	mixParallel        // attention and Mamba-2 side by side (Falcon-H1)
)

// mixerSet is a set of mixers, one bit each.
type mixerSet uint8

// mixers is the set of xs.
func mixers(xs ...mixer) mixerSet {
	var s mixerSet
	for _, x := range xs {
		s |= 1 << x
	}
	return s
}

func (s mixerSet) has(x mixer) bool { return s&(1<<x) != 0 }

// hybrid is the family of one recurrent or hybrid architecture: what sets
// it apart.
type hybrid struct {
	// mixers are the blocks its layers may run. A recurrent layer without
	// attention is a short convolution where the family has them, else a
	// Mamba-2 mixer.
	mixers mixerSet
	// qkNorm: its attention norms Q and K per head (LFM2).
	qkNorm bool
	// ffnNorm is the name of the FFN norm of a family whose layers all
	// end in an FFN ("" where not every one does).
	ffnNorm string
	// graph builds the architecture's graph, mix giving each layer's
	// block.
	graph func(r *rsGraph, mix []mixer) *ggml.Graph
}

// mixerOf is the block layer l runs, noMixer if none the family has.
func (o hybrid) mixerOf(m *arch.Model, l arch.Layer) mixer {
	attn := l.Attention == arch.Full && l.HeadsKV > 0 && l.KDim == l.VDim && m.NHead > 0 && l.KDim%l.HeadsKV == 0
	x := noMixer
	switch {
	case l.Recurrent && l.Attention == arch.NoAttention && o.mixers.has(mixShortConv):
		x = mixShortConv
	case l.Recurrent && l.Attention == arch.NoAttention:
		x = mixMamba2
	case !l.Recurrent && attn:
		x = mixAttention
	case !l.Recurrent && l.Attention == arch.NoAttention:
		x = mixMLP
	case l.Recurrent && attn:
		x = mixParallel
	}
	if x == noMixer || !o.mixers.has(x) || (o.ffnNorm != "" || x == mixMLP) && l.FF <= 0 {
		return noMixer
	}
	return x
}

func (o hybrid) graphOf(m *arch.Model) graphFunc {
	if m.NExpert > 0 || m.MLA || m.Window > 0 {
		return nil
	}
	mix := make([]mixer, len(m.Layers))
	shapes := tensorShapes(m)
	for il, l := range m.Layers {
		if mix[il] = o.mixerOf(m, l); mix[il] == noMixer {
			return nil
		}
		if mix[il] == mixMamba2 || mix[il] == mixParallel {
			if _, ok := recurrentMamba2Dims(m, shapes, il); !ok {
				return nil
			}
		}
		if !o.hasLayerTensors(m, il, mix[il]) {
			return nil
		}
	}
	return func(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
		r := newRSGraph(m, c, nTokens, b)
		r.qkNorm = o.qkNorm
		return o.graph(r, mix)
	}
}

// hasLayerTensors checks that layer il holds the weights its block
// reads, and no bias or extra weight the description leaves out.
func (o hybrid) hasLayerTensors(m *arch.Model, il int, x mixer) bool {
	blk := blkName(il)
	names := map[string]bool{}
	for _, t := range m.Tensors {
		if t.Layer == il {
			names[t.Name] = true
		}
	}
	need := []string{"attn_norm.weight"}
	switch x {
	case mixAttention, mixParallel:
		need = append(need, "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight")
	case mixShortConv:
		need = append(need, "shortconv.conv.weight", "shortconv.in_proj.weight", "shortconv.out_proj.weight")
	case mixMLP:
		need = append(need, "ffn_up.weight", "ffn_down.weight")
	}
	if o.ffnNorm != "" {
		need = append(need, o.ffnNorm, "ffn_up.weight", "ffn_gate.weight", "ffn_down.weight")
	}
	if o.qkNorm && x == mixAttention {
		need = append(need, "attn_q_norm.weight", "attn_k_norm.weight")
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
	blk := blkName(il)
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
