package ggml

import (
	"os"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

// Places where the model departs from ggml, found while writing these
// tests and reported rather than fixed here. Each test states ggml's
// behaviour and fails on the model as it is; they are skipped unless
// GGML_KNOWN_DIVERGENCES is set, so that the package's tests stay green
// until the code is fixed (then drop the skip).

func knownDivergence(t *testing.T) {
	t.Helper()
	if os.Getenv("GGML_KNOWN_DIVERGENCES") == "" {
		t.Skip("known divergence from ggml, reported; set GGML_KNOWN_DIVERGENCES=1 to run")
	}
}

// TestKnownClampIsAView: ggml_clamp returns ggml_view_tensor(a), so
// ggml-alloc never gives it memory of its own; op.go treats CLAMP as an
// in-place op instead, which is the same only when the allocator can
// reuse the source. When it cannot (the source has another reader, is an
// output or a view), the model allocates the CLAMP a block ggml does not.
// Reachable: with de3ff81's CUDA top-k dependency (Rules.CUDATopKDeps) the
// dependency node reads the SUM_ROWS under build_moe_ffn's CLAMP, and the
// CLAMP gets its own block (align(4*tokens) bytes on CUDA).
//
// Here s = sum_rows(w) is an output (1x4 F32, 32 aligned), c = clamp(s),
// e = sum_rows(c). ggml: s [0,32), c a view of s, e [32,64): 64. The
// model: s [0,32), c [32,64), e [64,96): 96.
func TestKnownClampIsAView(t *testing.T) {
	knownDivergence(t)
	var c Ctx
	w := c.External("w", gguf.TypeF32, "CPU", 8, 4)
	s := c.SumRows(w).SetOutput()
	cl := c.Clamp(s)
	c.Expand(c.SumRows(cl))
	if got := Reserve(&c.G, 32); got != 64 {
		t.Errorf("peak %d, ggml's 64: the clamp took memory of its own", got)
	}
}

// TestKnownLeadingViewsJoinFirstSplit: ggml_backend_sched_split_graph
// (pass 5) gives the first split the backend of the first node that is
// not a view op, and the view ops before it run in it. splitter.add
// opens a split on the view's own backend instead: a graph that starts
// with a reshape of a host input gets a CPU split holding only the
// reshape, and the GPU split (and so the Vulkan or Metal reorder, which
// runs per split) does not see it. No buffer size moves in the graphs
// described today, which start with GET_ROWS.
func TestKnownLeadingViewsJoinFirstSplit(t *testing.T) {
	knownDivergence(t)
	var c Ctx
	x := c.Input("x", gguf.TypeF32, 64, 3)
	r := c.Reshape(x, 64, 3)
	h := c.MulMat(c.External("w", gguf.TypeF32, "GPU0", 64, 64).SetWeight(64*64*4), r)
	c.Expand(h)
	splits, _ := cut(newSched(map[string]BufferType{"CPU": {Align: 32}, "GPU0": {Align: 32}}), &c.G)
	checkSplits(t, "leading view", splits, []splitWant{{"GPU0", []*Tensor{r, h}, []*Tensor{r}}})
}
