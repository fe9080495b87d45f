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
