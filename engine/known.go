package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/headroom-llm/headroom/plan"
)

// Known is a llama.cpp build headroom knows: one whose golden cases were
// measured, with the rules that set it apart from the build before it.
type Known struct {
	// Commit is the short commit hash llama.cpp's --version prints.
	Commit string `json:"commit"`
	// Source says where the build came from.
	Source string `json:"source"`
	// Modeled is true for a build the accounting reproduces: every rule
	// that differs from the builds before it is in Rules, and its measured
	// cases agree under them.
	Modeled bool `json:"modeled"`
	// Measured says what the golden cases of this build cover; empty for
	// a build whose cases are not in this repository.
	Measured string `json:"measured,omitempty"`
	// Drift is what differs from the build before it, each with where it
	// was seen.
	Drift []Drift `json:"drift,omitempty"`
	// Rules are the accounting rules of this build.
	Rules plan.Rules `json:"rules"`
}

// Drift is one kind of buffer known to differ between a build and the
// one before it.
type Drift struct {
	Buffers string `json:"buffers"`
	What    string `json:"what"`
	// Modeled says headroom applies this build's rule (plan.Rules) when
	// told the build; otherwise its figures keep the earlier build's.
	Modeled bool `json:"modeled"`
}

// KnownEngines lists the builds headroom knows, oldest first.
// Adding a build: build it (conformance/engine.sh --node-llama-cpp
// VERSION), measure the golden cases with it (conformance/regen.sh
// --engine DIR --golden DIR), compare with TestAccuracy, and list here
// what differs, rule by rule, with the commit where llama.cpp changed it.
func KnownEngines() []Known {
	return []Known{{
		Commit:   "80fb11a",
		Source:   "llama.cpp as node-llama-cpp 3.21.1 ships it (version 0.4.0-dev)",
		Modeled:  true,
		Measured: "llama-server on the CPU and on Vulkan (Mesa llvmpipe), node-llama-cpp library contexts, rpc-server over loopback (conformance/testdata, docs/accuracy.md)",
	}, {
		Commit:   "de3ff81",
		Source:   "llama.cpp as node-llama-cpp 3.22.1 ships it (v0.5.0, 28 Sep 2026), sixteen days newer",
		Modeled:  true,
		Measured: deMeasured,
		Drift: []Drift{
			{Buffers: "KV", Modeled: true, What: "NextN (multi-token prediction) layers are left out of the KV cache for every architecture: GLM-4.5-Air keeps 46 cache layers, not 47 (752 -> 736 MiB at 4096 cells, llama-fit-params of both builds)"},
			{Buffers: "flags", Modeled: true, What: "llama-server refuses --no-mmap (\"error: invalid argument\"): headroom writes --load-mode none for this build (seen loading with it)"},
			{Buffers: "Vulkan compute", Modeled: true, What: "the Vulkan graph reorder keeps the runs the backend fuses together, pulls a MUL after the UNARY it reads and keeps a top-k MoE selection's inputs alive until it ends (plan.Rules.VulkanFusion): Qwen3-Next with no layer offloaded 88.50 -> 68.12 MiB, Gemma 3n with every layer 144.01 -> 123.01 MiB (llama-server over llvmpipe, conformance/testdata/server-de3ff81, equal under this build's rules)"},
			{Buffers: "CUDA compute", Modeled: true, What: "ggml-cuda's graph_optimize keeps a fused top-k MoE selection (softmax or sigmoid, argsort, get_rows, the weights' normalization) and what it reads alive until the node after it (plan.Rules.CUDATopKDeps), read from the source (ggml_backend_cuda_graph_optimize); no CUDA load of either build is measured"},
			{Buffers: "Metal compute", Modeled: true, What: "the Metal backend's graph optimizer packs what its fusion table fuses before it reorders and keeps the sources of every run whose ops match a pattern alive until the run ends (plan.Rules.MetalFusion); checked with the Metal backend's own optimizer run on a CPU llama-server's splits (conformance/metalemu), not on a Metal device"},
			{Buffers: "compute", Modeled: true, What: "the scheduler no longer starts a split when one holds 30 inputs (plan.Rules.SplitInputsGrow), and the gated delta net's L2 norms are an RMS norm and a scale (plan.Rules.GDNNormAsRMS; Qwen3-Next's graph 5059 -> 5131 nodes)"},
		},
		Rules: plan.Rules{NextNWithoutKV: true, LoadMode: true, VulkanFusion: true, SplitInputsGrow: true, GDNNormAsRMS: true,
			CUDATopKDeps: true, MetalFusion: true},
	}}
}

// deMeasured is what de3ff81's golden cases cover.
const deMeasured = "llama-server on the CPU, on Vulkan over llvmpipe and over rpc-servers, every llama-server case of 80fb11a's set (conformance/testdata/server-de3ff81, docs/accuracy-de3ff81.md)"

// engines is a list of known builds, oldest first, which the notes are
// worked out from (KnownEngines in use; others in tests).
type engines []Known

// Default is the build figures are for when the user names none: the
// newest one the accounting reproduces.
func Default() Known { return engines(KnownEngines()).newest() }

func (ks engines) newest() Known {
	for i := len(ks) - 1; i > 0; i-- {
		if ks[i].Modeled {
			return ks[i]
		}
	}
	return ks[0]
}

// Identify finds a build among the known ones by its commit (a prefix of
// at least seven characters matches either way).
func Identify(commit string) (Known, bool) { return engines(KnownEngines()).identify(commit) }

func (ks engines) identify(commit string) (Known, bool) {
	c := strings.ToLower(strings.TrimSpace(commit))
	if len(c) < 7 {
		return Known{}, false
	}
	for _, k := range ks {
		if strings.HasPrefix(c, k.Commit) || strings.HasPrefix(k.Commit, c) {
			return k, true
		}
	}
	return Known{}, false
}

// EngineNote says which build a result's figures are for and, where the
// user's build is another one, what is known to differ.
type EngineNote struct {
	// FiguresFor is the build whose rules the figures follow.
	FiguresFor string `json:"figures_for"`
	// Build is the user's build as asked or given, "" when none was.
	Build string `json:"build,omitempty"`
	// Exact is true where the figures are for a build headroom measured
	// and reproduces: the user's, or the default when none was given.
	Exact bool   `json:"exact"`
	Says  string `json:"says"`
	// Drift is what is known to differ for the user's build, or, for a
	// build headroom does not know, what moved between the measured ones.
	Drift []Drift `json:"drift,omitempty"`
	// Rules are the rules the accounting applies.
	Rules plan.Rules `json:"rules"`
}

// Note describes figures for the user's build: commit is the commit its
// --version printed and printed the build as the user knows it; both ""
// when no build was given, commit "" for a build known only by name.
func Note(commit, printed string) EngineNote { return engines(KnownEngines()).note(commit, printed) }

func (ks engines) note(commit, printed string) EngineNote {
	d := ks.newest()
	n := EngineNote{FiguresFor: "llama.cpp " + d.Commit, Rules: d.Rules}
	if commit == "" && printed == "" {
		n.Exact = true
		n.Says = fmt.Sprintf("figures for llama.cpp %s, the newest build headroom has measured; --engine or --llama-server names yours, and fit and plan --verify ask it", d.Commit)
		return n
	}
	n.Build = printed
	k, ok := ks.identify(commit)
	switch {
	case ok && k.Modeled:
		n.Exact, n.Rules, n.FiguresFor = true, k.Rules, "llama.cpp "+k.Commit
		n.Says = fmt.Sprintf("figures for llama.cpp %s: your build (%s) is one headroom has measured (%s)", k.Commit, printed, k.Measured)
	case ok:
		n.Drift, n.Rules = k.Drift, k.Rules
		var applied, kept []string
		for _, dr := range k.Drift {
			if dr.Modeled {
				applied = append(applied, dr.Buffers)
			} else {
				kept = append(kept, dr.Buffers)
			}
		}
		prev := ks.previous(k.Commit)
		n.FiguresFor = fmt.Sprintf("llama.cpp %s's rules for %s, %s's for the rest", k.Commit, strings.Join(applied, " and "), prev)
		measured := "not measured against this build"
		if k.Measured != "" {
			measured = "measured against it: " + k.Measured
		}
		n.Says = fmt.Sprintf("figures for your build (%s, %s) where its rules are known (%s), llama.cpp %s's elsewhere: it is known to differ in %s too, which is not modeled (%s); fit and plan --verify ask your build itself", printed, k.Source, strings.Join(applied, ", "), prev, strings.Join(kept, " and "), measured)
		if len(applied) == 0 {
			n.FiguresFor = "llama.cpp " + prev
		}
	default:
		var kinds []string
		for _, b := range ks {
			for _, dr := range b.Drift {
				n.Drift = append(n.Drift, dr)
				if !slices.Contains(kinds, dr.Buffers) {
					kinds = append(kinds, dr.Buffers)
				}
			}
		}
		n.Says = fmt.Sprintf("figures for llama.cpp %s, not for your build (%s), which headroom has not measured: between the builds it measured, %s changed within sixteen days; fit and plan --verify ask your build itself", d.Commit, printed, strings.Join(kinds, ", "))
	}
	return n
}

// previous is the commit of the known build before commit.
func (ks engines) previous(commit string) string {
	for i := 1; i < len(ks); i++ {
		if ks[i].Commit == commit {
			return ks[i-1].Commit
		}
	}
	return ks[0].Commit
}

// AskNote runs bin --version and describes figures for that build; a
// build that does not answer is said, not hidden.
func AskNote(ctx context.Context, bin string) EngineNote {
	if bin == "" {
		return Note("", "")
	}
	b, err := Version(ctx, bin)
	if err != nil {
		n := Note("", "")
		n.Exact = false
		n.Says = fmt.Sprintf("figures for llama.cpp %s; %s did not say its build: %v", Default().Commit, bin, err)
		return n
	}
	return BuildNote(b)
}

// BuildNote describes figures for a build the user has: a build headroom
// measured is known by its commit; any other with a release build number
// is planned under the rules its number implies (RulesForBuild), said to
// be an estimate; one without (a packaged build says "build 1") gets
// the newest measured build's figures, as Note gives them.
func BuildNote(b Build) EngineNote {
	ks := engines(KnownEngines())
	if _, ok := ks.identify(b.Commit); ok || b.Number <= 1 {
		return ks.note(b.Commit, b.String())
	}
	br := RulesForBuild(b.Number)
	n := EngineNote{Build: b.String(), Rules: br.Rules,
		FiguresFor: fmt.Sprintf("llama.cpp b%d's rules, as far as headroom knows them", b.Number)}
	says := fmt.Sprintf("figures for your build (%s) under the rules its build number implies; headroom has not measured this build, so they are estimates", b)
	if len(br.Predates) > 0 {
		says += fmt.Sprintf("; it predates %d changes headroom models, whose earlier rules are applied: %s", len(br.Predates), strings.Join(br.Predates, "; "))
	}
	if len(br.Uncertain) > 0 {
		says += "; where a change's first build is only bounded, the later rule is taken: " + strings.Join(br.Uncertain, "; ")
	}
	if br.Outside != "" {
		says += "; " + br.Outside
	}
	n.Says = says + "; fit and plan --verify ask your build itself"
	return n
}
