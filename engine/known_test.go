package engine

import (
	"context"
	"strings"
	"testing"
)

// Figures are said to be for the modeled build, exact only for it, with
// what is known to drift for a known other build and a plain "not
// measured" for an unknown one.
func TestNote(t *testing.T) {
	for _, tt := range []struct {
		commit string
		exact  bool
		says   string
		drift  int
	}{
		{"", true, "figures for llama.cpp 80fb11a, the build the accounting was measured against", 0},
		{"80fb11a", true, "your build (x) is the one the accounting was measured against", 0},
		{"80fb11a3c2", true, "is the one", 0},
		{"de3ff81", false, "where its rules are known (KV, flags), llama.cpp 80fb11a's elsewhere: it is known to differ in Vulkan compute too, which is not modeled", 3},
		{"1234567", false, "which headroom has not measured", 0},
		{"80fb", false, "which headroom has not measured", 0}, // too short to name a build
	} {
		printed := "x"
		if tt.commit == "" {
			printed = ""
		}
		n := Note(tt.commit, printed)
		figures := "llama.cpp 80fb11a"
		if tt.drift > 0 {
			figures = "llama.cpp de3ff81's rules for KV and flags, 80fb11a's for the rest"
		}
		if n.Exact != tt.exact || !strings.Contains(n.Says, tt.says) || len(n.Drift) != tt.drift || n.FiguresFor != figures || n.Rules.NextNWithoutKV != (tt.drift > 0) {
			t.Errorf("%q: %+v", tt.commit, n)
		}
	}
	if m := Modeled(); !m.Modeled || m.Measured == "" {
		t.Errorf("modeled %+v", m)
	}
	for _, k := range KnownEngines()[1:] {
		if k.Modeled || len(k.Drift) == 0 {
			t.Errorf("%s: a build other than the modeled one must say what drifts", k.Commit)
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
