package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/builds"
)

// Figures are for the newest measured build unless the user names
// another measured one; exact only for a measured build, with what moved
// between measured builds for one headroom does not know.
func TestNote(t *testing.T) {
	de, old := builds.For(11146), builds.For(10809)
	for _, tt := range []struct {
		commit  string
		exact   bool
		says    string
		figures string
		rules   builds.Rules
		drift   int
	}{
		{"", true, "figures for llama.cpp de3ff81, the newest build headroom has measured", "llama.cpp de3ff81", de, 0},
		{"80fb11a", true, "your build (x) is one headroom has measured", "llama.cpp 80fb11a", old, 0},
		{"80fb11a3c2", true, "is one headroom has measured", "llama.cpp 80fb11a", old, 0},
		{"de3ff81", true, "your build (x) is one headroom has measured", "llama.cpp de3ff81", de, 0},
		{"1234567", false, "which headroom has not measured: between the builds it measured, KV, flags, Vulkan compute, CUDA compute, Metal compute, compute, serving changed", "llama.cpp de3ff81", de, 7},
		{"80fb", false, "which headroom has not measured", "llama.cpp de3ff81", de, 7}, // too short to name a build
	} {
		printed := "x"
		if tt.commit == "" {
			printed = ""
		}
		n := Note(tt.commit, printed)
		if n.Exact != tt.exact || !strings.Contains(n.Says, tt.says) || len(n.Drift) != tt.drift || n.FiguresFor != tt.figures || n.Rules != tt.rules {
			t.Errorf("%q: %+v", tt.commit, n)
		}
	}
	ks := builds.Measured()
	for i, k := range ks[1:] {
		if len(k.Drift) == 0 {
			t.Errorf("%s: a build after %s must say what drifts", k.Commit, ks[i].Commit)
		}
		for _, d := range k.Drift {
			if k.Modeled && !d.Modeled {
				t.Errorf("%s is called modeled but its %s drift is not", k.Commit, d.Buffers)
			}
		}
	}
}

// A build that cannot be asked is said, and nothing is called exact.
func TestAskNoteUnanswered(t *testing.T) {
	n := AskNote(context.Background(), "/nonexistent/llama-server")
	if n.Exact || !strings.Contains(n.Says, "did not say its build") {
		t.Errorf("%+v", n)
	}
}

// A known build whose rules are only partly modeled gets them, the
// earlier build's figures elsewhere, and the unmodeled drift said; it is
// the newest modeled build that stays the default.
func TestNotePartlyModeled(t *testing.T) {
	ks := engines{
		{Commit: "aaaaaaa", Modeled: true},
		{Commit: "bbbbbbb", Source: "a later build", Measured: "two CPU loads", Rules: builds.Rules{LoadMode: true}, Drift: []builds.Drift{
			{Buffers: "flags", Modeled: true, What: "x"},
			{Buffers: "Vulkan compute", What: "y"},
		}},
	}
	n := ks.note("bbbbbbb", "b1")
	if n.Exact || n.FiguresFor != "llama.cpp bbbbbbb's rules for flags, aaaaaaa's for the rest" || !n.Rules.LoadMode || len(n.Drift) != 2 ||
		!strings.Contains(n.Says, "known to differ in Vulkan compute too, which is not modeled (measured against it: two CPU loads)") {
		t.Errorf("%+v", n)
	}
	if d := ks.newest(); d.Commit != "aaaaaaa" {
		t.Errorf("default %s, want the newest modeled build", d.Commit)
	}
	if n := ks.note("", ""); !n.Exact || n.FiguresFor != "llama.cpp aaaaaaa" {
		t.Errorf("no build: %+v", n)
	}
}

// A user's build is planned by its number unless headroom measured it;
// a packaged build that says "build 1" gets the newest measured figures.
func TestBuildNote(t *testing.T) {
	n := BuildNote(Build{Number: 6699, Commit: "c08002a1"})
	if n.Exact || n.Rules != builds.For(6699) || !strings.Contains(n.Says, "estimates") || n.Build != "b6699 (c08002a1)" {
		t.Errorf("b6699: %+v", n)
	}
	if n := BuildNote(Build{Number: 1, Release: "0.5.0-dev", Commit: "de3ff81"}); !n.Exact || n.Rules != builds.For(11146) {
		t.Errorf("de3ff81 packaged: %+v", n)
	}
	if n := BuildNote(Build{Number: 1, Release: "0.9.0-dev", Commit: "1234567"}); n.Exact || n.Rules != builds.Default() {
		t.Errorf("an unknown packaged build: %+v", n)
	}
}
