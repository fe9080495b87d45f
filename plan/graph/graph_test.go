package graph

import (
	"fmt"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/ggml"
	"github.com/headroom-llm/headroom/synth"
)

// shapeModel is the model synth's header for the shape describes, read
// as arch reads a file.
func shapeModel(t testing.TB, s synth.Shape, q synth.Quant) *arch.Model {
	t.Helper()
	m, err := synth.Model(s, q)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// model is shapeModel of a built-in shape.
func model(t testing.TB, shape string, q synth.Quant) *arch.Model {
	t.Helper()
	s, ok := synth.Lookup(shape)
	if !ok {
		t.Fatalf("no shape %s", shape)
	}
	return shapeModel(t, s, q)
}

// measuredRules are the rules of a build headroom measured, changed by
// each edit: the tests of an older rule take a measured build's and turn
// that one rule back.
func measuredRules(t testing.TB, commit string, edits ...func(*builds.Rules)) builds.Rules {
	t.Helper()
	b, ok := builds.Identify(commit)
	if !ok {
		t.Fatalf("no measured build %s", commit)
	}
	r := b.Rules
	for _, e := range edits {
		e(&r)
	}
	return r
}

// load is the flags of a measured load: -c (cells in all), -np (each
// sequence its own stream), -b and -ub (0 for llama.cpp's 2048 and 512),
// -fa on or off, -ctk and -ctv ("" for f16), --swa-full, and whose
// context it was: llama-server's, which keeps one output row per slot, or
// a library's (node-llama-cpp, n_outputs_max = n_batch), which keeps a
// row per token of the micro-batch.
type load struct {
	ctx, seqs, batch, ubatch int
	flash                    bool
	cacheK, cacheV           string
	swaFull                  bool
	server                   bool
}

// context is the load as llama_context resolves it (plan's
// resolveContext, for the cell counts the tests use: multiples of 512,
// which every build pads alike).
func (l load) context(t testing.TB) Context {
	t.Helper()
	seqs, batch, ubatch := max(l.seqs, 1), l.batch, l.ubatch
	if batch == 0 {
		batch = 2048
	}
	if ubatch == 0 {
		ubatch = 512
	}
	c := Context{NSeq: seqs, NStream: seqs, Flash: l.flash, VTrans: !l.flash, SWAFull: l.swaFull,
		TypeK: cacheType(t, l.cacheK), TypeV: cacheType(t, l.cacheV)}
	c.NCtxSeq = pad(pad(l.ctx, 256)/seqs, 256)
	c.NCtx = c.NCtxSeq * seqs
	c.NBatch = min(c.NCtx, batch)
	c.NUBatch = min(c.NBatch, ubatch)
	c.NOutputsMax = 0 // every row
	if l.server {
		c.NOutputsMax = max(1, min(c.NBatch, seqs))
	}
	return c
}

func (l load) String() string {
	s := fmt.Sprintf("-c %d -np %d -ub %d -fa %v", l.ctx, max(l.seqs, 1), l.ubatch, l.flash)
	if l.cacheK != "" || l.cacheV != "" {
		s += fmt.Sprintf(" -ctk %s -ctv %s", l.cacheK, l.cacheV)
	}
	if l.swaFull {
		s += " --swa-full"
	}
	return s
}

// cacheType is the type -ctk or -ctv names.
func cacheType(t testing.TB, name string) gguf.GGMLType {
	switch name {
	case "", "f16":
		return gguf.TypeF16
	case "q8_0":
		return gguf.TypeQ8_0
	}
	t.Fatalf("cache type %q", name)
	return 0
}

// cpuBytes is the CPU compute buffer llama.cpp reserves for the model's
// graphs: the larger of the micro-batch's and, with more sequences than
// micro-batch tokens, the one-token-per-sequence graph's, each allocated
// at TENSOR_ALIGNMENT.
func cpuBytes(build Builder, c Context, rules builds.Rules) int64 {
	reserve := func(n int) int64 { return ggml.Reserve(build(c, n, Placement{CPU: "CPU", Rules: rules}), 32) }
	n := reserve(c.NUBatch)
	if c.NSeq > c.NUBatch {
		n = max(n, reserve(c.NSeq))
	}
	return n
}

// replay is one measured load of a built-in shape: llama.cpp's graph node
// count ("graph nodes") and CPU compute buffer (MiB to the four decimals
// it prints; 0 where only the nodes were kept).
type replay struct {
	shape string
	quant synth.Quant
	load
	nodes int
	mib   float64
}

// checkReplays holds the replay of each load, with 80fb11a's rules, to
// llama.cpp's node count and, to the printed precision, its CPU compute
// buffer.
func checkReplays(t *testing.T, cases []replay) {
	t.Helper()
	rules := measuredRules(t, "80fb11a")
	for _, tc := range cases {
		m := model(t, tc.shape, tc.quant)
		build := For(m)
		if build == nil {
			t.Errorf("%s: no builder", tc.shape)
			continue
		}
		c := tc.context(t)
		g := build(c, c.NUBatch, Placement{CPU: "CPU", Rules: rules})
		if len(g.Nodes()) != tc.nodes {
			t.Errorf("%s %v: %d graph nodes, llama.cpp's graph has %d", tc.shape, tc.load, len(g.Nodes()), tc.nodes)
		}
		if tc.mib == 0 {
			continue
		}
		got := float64(cpuBytes(build, c, rules)) / (1 << 20)
		if d := got - tc.mib; d > 0.00005 || d < -0.00005 {
			t.Errorf("%s %v: %.4f MiB, llama.cpp %.4f (diff %+.4f)", tc.shape, tc.load, got, tc.mib, d)
		}
	}
}

// ruleGraphs is a shape's worst-case graph at ctx cells as a build
// with rules r records it, for the tests of older builds' rules; the
// model, context and builder are returned beside it.
func ruleGraphs(t *testing.T, shape string, q synth.Quant, ctx int, flash bool) (*arch.Model, Context, Builder, func(r builds.Rules) *ggml.Graph) {
	t.Helper()
	m := model(t, shape, q)
	c := load{ctx: ctx, flash: flash, server: true}.context(t)
	build := For(m)
	return m, c, build, func(r builds.Rules) *ggml.Graph { return build(c, c.NUBatch, Placement{CPU: "CPU", Rules: r}) }
}

// A sliding cache holds one window per stream (every sequence's when the
// cache is unified) and a micro-batch, padded, at most the full cache.
func TestSWACells(t *testing.T) {
	c := Context{NCtxSeq: 8192, NSeq: 4, NUBatch: 512}
	for _, tc := range []struct {
		unified, full bool
		window, want  int
	}{
		{false, false, 1024, 1536},
		{false, false, 1000, 1536},
		{true, false, 1024, 4608},
		{true, false, 4096, 8192},
		{false, true, 1024, 8192},
	} {
		c.Unified, c.SWAFull = tc.unified, tc.full
		if got := c.SWACells(tc.window); got != tc.want {
			t.Errorf("window %d unified %v full %v: %d cells, want %d", tc.window, tc.unified, tc.full, got, tc.want)
		}
	}
}
