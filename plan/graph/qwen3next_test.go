package graph

import (
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/synth"
)

// Qwen3-Next in the legacy form (one ssm_in for q, k, v and z) runs other
// nodes than the description's.
func TestQwen3NextDeclinesLegacy(t *testing.T) {
	m := model(t, "qwen3-next-80b-a3b", synth.Q5_K_M)
	if (qwen3next{}).graphOf(m) == nil {
		t.Fatal("qwen3next: no graph for the split projections")
	}
	legacy := arch.Tensor{Layer: 0}
	legacy.Name, legacy.Shape = "blk.0.ssm_in.weight", []uint64{2048, 12288}
	m.Tensors = append(m.Tensors, legacy)
	if (qwen3next{}).graphOf(m) != nil {
		t.Error("qwen3next with a legacy ssm_in: a graph")
	}
}

// de3ff81 records the gated delta net's L2 norms of q and k as an RMS
// norm and a scale (build_gdn_l2_norm): issue #12's re-measurement with
// that build counted 5131 graph nodes for Qwen3-Next where 80fb11a has
// 5059, the two more nodes of each of its 36 linear-attention layers.
func TestGDNNormNodes(t *testing.T) {
	m := model(t, "qwen3-next-80b-a3b", synth.Q5_K_M)
	build := For(m)
	c := load{ctx: 4096, batch: 512}.context(t)
	for _, tc := range []struct {
		rules builds.Rules
		nodes int
	}{{measuredRules(t, "80fb11a"), 5059}, {measuredRules(t, "de3ff81"), 5131}} {
		if g := build(c, c.NUBatch, Placement{CPU: "CPU", Rules: tc.rules}); len(g.Nodes()) != tc.nodes {
			t.Errorf("%+v: %d graph nodes, want %d", tc.rules, len(g.Nodes()), tc.nodes)
		}
	}
}

// Current conversions of Qwen3.5 and 3.6 append one MTP block
// (nextn_predict_layers 1). The main graph does not run it, and it keeps
// no cache: the same graph as without it, node for node.
func TestQwen35MTPBlockLeftOut(t *testing.T) {
	for _, shape := range []string{"qwen3.5-0.8b", "qwen3.5-35b-a3b"} {
		s, _ := synth.Lookup(shape)
		plain := shapeModel(t, s, synth.Q8_0)
		ssm := *s.SSM
		ssm.MTP = 1
		s.SSM = &ssm
		m := shapeModel(t, s, synth.Q8_0)
		if m.NextN != 1 || len(m.Layers) != len(plain.Layers)+1 {
			t.Fatalf("%s with MTP: %d layers, NextN %d", shape, len(m.Layers), m.NextN)
		}
		if l := m.Layers[len(m.Layers)-1]; l.Recurrent || l.Attention != arch.NoAttention {
			t.Errorf("%s: the MTP block has a cache: %+v", shape, l)
		}
		build, base := For(m), For(plain)
		if build == nil {
			t.Fatalf("%s with an MTP block: no graph", shape)
		}
		c := load{ctx: 4096, batch: 512}.context(t)
		p := Placement{CPU: "CPU", Rules: measuredRules(t, "80fb11a")}
		if got, want := len(build(c, c.NUBatch, p).Nodes()), len(base(c, c.NUBatch, p).Nodes()); got != want {
			t.Errorf("%s: %d graph nodes with the MTP block, %d without", shape, got, want)
		}
	}
}
