package builds

import "strings"

// Build is a llama.cpp build headroom measured: its golden cases were
// loaded by it, and the table's rules for its number reproduce them.
type Build struct {
	// Commit is the short commit hash llama.cpp's --version prints.
	Commit string `json:"commit"`
	// Number is the release build whose rules this build has. The
	// packaged builds measured here print "build 1", so the number is
	// the release tag the commit sits at or just before, and the golden
	// cases hold the table to it (conformance).
	Number int `json:"number"`
	// Release is the release tag of that number.
	Release string `json:"release"`
	// Source says where the build came from.
	Source string `json:"source"`
	// Modeled is true for a build the accounting reproduces: every rule
	// that differs from the builds before it is in the table, and its
	// measured cases agree under them.
	Modeled bool `json:"modeled"`
	// Measured says what the golden cases of this build cover; empty for
	// a build whose cases are not in this repository.
	Measured string `json:"measured,omitempty"`
	// Drift is what differs from the build before it, each with where it
	// was seen.
	Drift []Drift `json:"drift,omitempty"`
	// Rules are the accounting rules of this build: For(Number).
	Rules Rules `json:"rules"`
}

// Drift is one kind of buffer known to differ between a build and the
// one before it.
type Drift struct {
	Buffers string `json:"buffers"`
	What    string `json:"what"`
	// Modeled says headroom applies this build's rule when told the
	// build; otherwise its figures keep the earlier build's.
	Modeled bool `json:"modeled"`
}

// Measured lists the builds headroom measured, oldest first.
// Adding a build: build it (conformance/engine.sh --node-llama-cpp
// VERSION), measure the golden cases with it (conformance/regen.sh
// --engine DIR --golden DIR), compare with TestAccuracy, add a row to
// changes for every rule that moved, and list it here with what differs.
func Measured() []Build {
	bs := []Build{{
		Commit:   "80fb11a",
		Number:   10809,
		Release:  "v0.4.0",
		Source:   "llama.cpp as node-llama-cpp 3.21.1 ships it (version 0.4.0-dev)",
		Modeled:  true,
		Measured: "llama-server on the CPU and on Vulkan (Mesa llvmpipe), node-llama-cpp library contexts, rpc-server over loopback (conformance/testdata, docs/accuracy.md)",
	}, {
		Commit:   "de3ff81",
		Number:   11146,
		Release:  "v0.5.0",
		Source:   "llama.cpp as node-llama-cpp 3.22.1 ships it (v0.5.0, 28 Sep 2026), sixteen days newer",
		Modeled:  true,
		Measured: "llama-server on the CPU, on Vulkan over llvmpipe and over rpc-servers, every llama-server case of 80fb11a's set (conformance/testdata/server-de3ff81, docs/accuracy-de3ff81.md)",
		Drift: []Drift{
			{Buffers: "KV", Modeled: true, What: "NextN (multi-token prediction) layers are left out of the KV cache for every architecture: GLM-4.5-Air keeps 46 cache layers, not 47 (752 -> 736 MiB at 4096 cells, llama-fit-params of both builds)"},
			{Buffers: "flags", Modeled: true, What: "llama-server refuses --no-mmap (\"error: invalid argument\"): headroom writes --load-mode none for this build (seen loading with it)"},
			{Buffers: "Vulkan compute", Modeled: true, What: "the Vulkan graph reorder keeps the runs the backend fuses together, pulls a MUL after the UNARY it reads and keeps a top-k MoE selection's inputs alive until it ends (Rules.VulkanFusion): Qwen3-Next with no layer offloaded 88.50 -> 68.12 MiB, Gemma 3n with every layer 144.01 -> 123.01 MiB (llama-server over llvmpipe, conformance/testdata/server-de3ff81, equal under this build's rules)"},
			{Buffers: "CUDA compute", Modeled: true, What: "ggml-cuda's graph_optimize keeps a fused top-k MoE selection (softmax or sigmoid, argsort, get_rows, the weights' normalization) and what it reads alive until the node after it (Rules.CUDATopKDeps), read from the source (ggml_backend_cuda_graph_optimize); no CUDA load of either build is measured"},
			{Buffers: "Metal compute", Modeled: true, What: "the Metal backend's graph optimizer packs what its fusion table fuses before it reorders and keeps the sources of every run whose ops match a pattern alive until the run ends (Rules.MetalFusion); checked with the Metal backend's own optimizer run on a CPU llama-server's splits (conformance/metalemu), not on a Metal device"},
			{Buffers: "compute", Modeled: true, What: "the scheduler no longer starts a split when one holds 30 inputs (Rules.SplitInputsGrow), and the gated delta net's L2 norms are an RMS norm and a scale (Rules.GDNNormAsRMS; Qwen3-Next's graph 5059 -> 5131 nodes)"},
			{Buffers: "serving", Modeled: true, What: "llama-server erases a slot's older context checkpoints within -cms of another only once it holds -ctxcp of them (Rules.CheckpointsToCap, PR #28302), so a conversation keeps up to 32 per slot by default; read from the source (server-context.cpp create_checkpoint), the prompt cache's code unchanged; no serving workload of this build is measured"},
		},
	}}
	for i := range bs {
		bs[i].Rules = For(bs[i].Number)
	}
	return bs
}

// Newest is the build figures are for when the user names none: the
// newest one the accounting reproduces.
func Newest() Build { return NewestOf(Measured()) }

// NewestOf is the newest modeled build of bs, listed oldest first.
func NewestOf(bs []Build) Build {
	for i := len(bs) - 1; i > 0; i-- {
		if bs[i].Modeled {
			return bs[i]
		}
	}
	return bs[0]
}

// Default is the rules of Newest: what plans follow when no build is
// named.
func Default() Rules { return For(Newest().Number) }

// Identify finds a measured build by its commit (a prefix of at least
// seven characters matches either way).
func Identify(commit string) (Build, bool) { return Find(Measured(), commit) }

// Find is Identify among bs.
func Find(bs []Build, commit string) (Build, bool) {
	c := strings.ToLower(strings.TrimSpace(commit))
	if len(c) < 7 {
		return Build{}, false
	}
	for _, b := range bs {
		if strings.HasPrefix(c, b.Commit) || strings.HasPrefix(b.Commit, c) {
			return b, true
		}
	}
	return Build{}, false
}
