package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/headroom-llm/headroom/plan"
)

// Known is a llama.cpp build headroom knows: the one its accounting
// models, measured against, or one whose differences from it were
// measured.
type Known struct {
	// Commit is the short commit hash llama.cpp's --version prints.
	Commit string `json:"commit"`
	// Source says where the build came from.
	Source string `json:"source"`
	// Modeled is true for the build headroom's accounting reproduces.
	Modeled bool `json:"modeled"`
	// Measured says what the golden cases of this build cover; empty for
	// a build whose cases are not in this repository.
	Measured string `json:"measured,omitempty"`
	// Drift is what differs from the modeled build, each with where it
	// was seen.
	Drift []Drift `json:"drift,omitempty"`
	// Rules are the accounting rules of this build that headroom models.
	Rules plan.Rules `json:"rules"`
}

// Drift is one kind of buffer known to differ between a build and the
// modeled one.
type Drift struct {
	Buffers string `json:"buffers"`
	What    string `json:"what"`
	// Modeled says headroom applies this build's rule (plan.Rules) when
	// told the build; otherwise its figures keep the modeled build's.
	Modeled bool `json:"modeled"`
}

// KnownEngines lists the builds headroom knows, the modeled one first.
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
		Measured: "llama-server on the CPU (98 cases) and four Vulkan cases over llvmpipe (conformance/testdata/server-de3ff81, docs/accuracy-de3ff81.md)",
		Drift: []Drift{
			{Buffers: "KV", Modeled: true, What: "NextN (multi-token prediction) layers are left out of the KV cache for every architecture: GLM-4.5-Air keeps 46 cache layers, not 47 (752 -> 736 MiB at 4096 cells, llama-fit-params of both builds)"},
			{Buffers: "flags", Modeled: true, What: "llama-server refuses --no-mmap (\"error: invalid argument\"): headroom writes --load-mode none for this build (seen loading with it)"},
			{Buffers: "Vulkan compute", Modeled: false, What: "the Vulkan graph reorder keeps new fusion patterns together: Qwen3-Next with no layer offloaded 88.50 -> 68.12 MiB, Gemma 3n with every layer 144.01 -> 123.01 MiB (llama-server over llvmpipe, conformance/testdata/server-de3ff81); headroom's 80fb11a figure is the larger, and other splits moved both ways in issue #12's re-measurement (TinyLlama with flash attention 66.50 -> 70.50 MiB)"},
		},
		Rules: plan.Rules{NextNWithoutKV: true, LoadMode: true},
	}}
}

// Modeled is the build headroom's accounting reproduces.
func Modeled() Known { return KnownEngines()[0] }

// Identify finds a build among the known ones by its commit (a prefix of
// at least seven characters matches either way).
func Identify(commit string) (Known, bool) {
	c := strings.ToLower(strings.TrimSpace(commit))
	if len(c) < 7 {
		return Known{}, false
	}
	for _, k := range KnownEngines() {
		if strings.HasPrefix(c, k.Commit) || strings.HasPrefix(k.Commit, c) {
			return k, true
		}
	}
	return Known{}, false
}

// EngineNote says which build a result's figures are for and, where the
// user's build is another one, what is known to differ.
type EngineNote struct {
	// FiguresFor is the modeled build: every figure is its.
	FiguresFor string `json:"figures_for"`
	// Build is the user's build as asked or given, "" when none was.
	Build string `json:"build,omitempty"`
	// Exact is true where the user's build is the modeled one, or none
	// was given.
	Exact bool   `json:"exact"`
	Says  string `json:"says"`
	// Drift is what is known to differ for the user's build.
	Drift []Drift `json:"drift,omitempty"`
	// Rules are the user's build's rules the accounting applies.
	Rules plan.Rules `json:"rules"`
}

// Note describes figures for the user's build: commit is the commit its
// --version printed and printed the build as the user knows it; both ""
// when no build was given, commit "" for a build known only by name.
func Note(commit, printed string) EngineNote {
	m := Modeled()
	n := EngineNote{FiguresFor: "llama.cpp " + m.Commit}
	if commit == "" && printed == "" {
		n.Exact = true
		n.Says = fmt.Sprintf("figures for llama.cpp %s, the build the accounting was measured against; fit and plan --verify ask your own llama.cpp", m.Commit)
		return n
	}
	n.Build = printed
	k, ok := Identify(commit)
	switch {
	case ok && k.Modeled:
		n.Exact = true
		n.Says = fmt.Sprintf("figures for llama.cpp %s: your build (%s) is the one the accounting was measured against", m.Commit, printed)
	case ok:
		n.Drift, n.Rules = k.Drift, k.Rules
		var applied, kept []string
		for _, d := range k.Drift {
			if d.Modeled {
				applied = append(applied, d.Buffers)
			} else {
				kept = append(kept, d.Buffers)
			}
		}
		n.FiguresFor = fmt.Sprintf("llama.cpp %s's rules for %s, %s's for the rest", k.Commit, strings.Join(applied, " and "), m.Commit)
		measured := "not measured against this build"
		if k.Measured != "" {
			measured = "measured against it: " + k.Measured
		}
		n.Says = fmt.Sprintf("figures for your build (%s, %s) where its rules are known (%s), llama.cpp %s's elsewhere: it is known to differ in %s too, which is not modeled (%s); fit and plan --verify ask your build itself", printed, k.Source, strings.Join(applied, ", "), m.Commit, strings.Join(kept, " and "), measured)
		if len(applied) == 0 {
			n.FiguresFor = "llama.cpp " + m.Commit
		}
	default:
		n.Says = fmt.Sprintf("figures for llama.cpp %s, not for your build (%s), which headroom has not measured: llama.cpp moves buffers between builds (KV layers and compute buffers have drifted within sixteen days); fit and plan --verify ask your build itself", m.Commit, printed)
	}
	return n
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
		n.Says = fmt.Sprintf("figures for llama.cpp %s; %s did not say its build: %v", Modeled().Commit, bin, err)
		return n
	}
	return Note(b.Commit, b.String())
}
