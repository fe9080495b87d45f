package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/headroom-llm/headroom/builds"
)

// engines is a list of measured builds, oldest first, which the notes
// are worked out from (builds.Measured in use; others in tests).
type engines []builds.Build

func (ks engines) newest() builds.Build { return builds.NewestOf(ks) }

func (ks engines) identify(commit string) (builds.Build, bool) { return builds.Find(ks, commit) }

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
	Drift []builds.Drift `json:"drift,omitempty"`
	// Rules are the rules the accounting applies.
	Rules builds.Rules `json:"rules"`
}

// Note describes figures for the user's build: commit is the commit its
// --version printed and printed the build as the user knows it; both ""
// when no build was given, commit "" for a build known only by name.
func Note(commit, printed string) EngineNote { return engines(builds.Measured()).note(commit, printed) }

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
		n.Says = fmt.Sprintf("figures for llama.cpp %s; %s did not say its build: %v", builds.Newest().Commit, bin, err)
		return n
	}
	return BuildNote(b)
}

// BuildNote describes figures for a build the user has: a build headroom
// measured is known by its commit; any other with a release build number
// is planned under the rules its number implies (builds.Ruled), said to
// be an estimate; one without (a packaged build says "build 1") gets
// the newest measured build's figures, as Note gives them.
func BuildNote(b Build) EngineNote {
	ks := engines(builds.Measured())
	if _, ok := ks.identify(b.Commit); ok || b.Number <= 1 {
		return ks.note(b.Commit, b.String())
	}
	br := builds.Ruled(b.Number)
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
