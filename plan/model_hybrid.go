package plan

import (
	"strings"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file checks that a recurrent or hybrid model is one whose graph
// headroom describes (src/models/mamba.cpp, lfm2.cpp, nemotron-h.cpp,
// granite-hybrid.cpp and falcon-h1.cpp, each in a model_*.go of its own):
// which block each layer runs, and that the layer holds exactly the
// tensors that block reads.

// hybridOpts is what sets one recurrent or hybrid architecture apart.
type hybridOpts struct {
	// mixers are the blocks its layers may run: 'M' a Mamba-2 mixer, 'A'
	// attention, 'C' LFM2's short convolution, 'F' an MLP only
	// (Nemotron-H), 'P' attention and Mamba-2 in parallel (Falcon-H1).
	mixers string
	lfm2   bool // LFM2: short convolutions, Q and K norms, FFNs everywhere
	// ffnNorm is the name of the FFN norm of a family whose layers end in
	// an FFN ("" where none does).
	ffnNorm string
	// graph builds the architecture's graph, mixer giving each layer's
	// block.
	graph func(r *rsGraph, mixer []byte) *ggml.Graph
}

// mixerOf is the block layer l runs, 0 if none the family has.
func (o hybridOpts) mixerOf(m *arch.Model, l arch.Layer) byte {
	attn := l.Attention == arch.Full && l.HeadsKV > 0 && l.KDim == l.VDim && m.NHead > 0 && l.KDim%l.HeadsKV == 0
	var x byte
	switch {
	case l.Recurrent && l.Attention == arch.NoAttention && o.lfm2:
		x = 'C'
	case l.Recurrent && l.Attention == arch.NoAttention:
		x = 'M'
	case !l.Recurrent && attn:
		x = 'A'
	case !l.Recurrent && l.Attention == arch.NoAttention:
		x = 'F'
	case l.Recurrent && attn:
		x = 'P'
	}
	if x == 0 || !strings.ContainsRune(o.mixers, rune(x)) || (o.lfm2 || x == 'F') && l.FF <= 0 {
		return 0
	}
	return x
}

// hybridFamily returns the graph builder for a recurrent or hybrid model
// of the family, nil for a model it does not describe.
func hybridFamily(o hybridOpts) func(m *arch.Model) graphBuilder {
	return func(m *arch.Model) graphBuilder {
		if m.NExpert > 0 || m.MLA || m.Window > 0 {
			return nil
		}
		mixer := make([]byte, len(m.Layers))
		shapes := tensorShapes(m)
		for il, l := range m.Layers {
			if mixer[il] = o.mixerOf(m, l); mixer[il] == 0 {
				return nil
			}
			if mixer[il] == 'M' || mixer[il] == 'P' {
				if _, ok := recurrentMamba2Dims(m, shapes, il); !ok {
					return nil
				}
			}
			if !o.hasLayerTensors(m, il, mixer[il]) {
				return nil
			}
		}
		return func(m *arch.Model, c Context, nTokens int, b *gb) *ggml.Graph {
			return o.graph(newRSGraph(m, c, nTokens, b), mixer)
		}
	}
}

// hasLayerTensors checks that layer il holds the weights its block
// reads, and no bias or extra weight the description leaves out.
func (o hybridOpts) hasLayerTensors(m *arch.Model, il int, mixer byte) bool {
	blk := blkName(il)
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
	if o.ffnNorm != "" {
		need = append(need, o.ffnNorm, "ffn_up.weight", "ffn_gate.weight", "ffn_down.weight")
	}
	if o.lfm2 && mixer == 'A' {
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
