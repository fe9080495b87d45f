package graph

import (
	"testing"

	"github.com/headroom-llm/headroom/synth"
)

// A hybrid family describes only models whose every layer runs one of its
// mixers: a transformer is no Mamba-2 model.
func TestHybridDeclines(t *testing.T) {
	m := model(t, "tinyllama-1.1b", synth.Q8_0)
	if families()["mamba2"].graphOf(m) != nil {
		t.Error("llama: a Mamba-2 graph")
	}
	// LFM2's attention layers norm Q and K per head: without the norms
	// the layer is not LFM2's.
	m = model(t, "lfm2-350m", synth.Q8_0)
	if families()["lfm2"].graphOf(m) == nil {
		t.Fatal("lfm2: no graph")
	}
	for i, tn := range m.Tensors {
		if tn.Name == "blk.2.attn_q_norm.weight" {
			m.Tensors = append(m.Tensors[:i:i], m.Tensors[i+1:]...)
			break
		}
	}
	if families()["lfm2"].graphOf(m) != nil {
		t.Error("lfm2 without a Q norm: a graph")
	}
}

// Each layer's mixer follows from its attention and recurrence, within
// the blocks the family runs.
func TestMixerOf(t *testing.T) {
	fams := families()
	for _, tc := range []struct {
		arch string
		il   int
		want mixer
	}{
		{"mamba2", 0, mixMamba2},
		{"lfm2", 0, mixShortConv},
		{"lfm2", 2, mixAttention},
		{"falcon-h1", 0, mixParallel},
	} {
		shape := map[string]string{"mamba2": "mamba2-130m", "lfm2": "lfm2-350m", "falcon-h1": "falcon-h1-0.5b"}[tc.arch]
		m := model(t, shape, synth.Q8_0)
		if got := fams[tc.arch].(hybrid).mixerOf(m, m.Layers[tc.il]); got != tc.want {
			t.Errorf("%s layer %d: mixer %d, want %d", tc.arch, tc.il, got, tc.want)
		}
	}
}
