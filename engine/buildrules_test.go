package engine

import (
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/plan"
)

// The table must give the measured builds their own rules: 80fb11a is
// llama.cpp v0.4.0 (b10809) as node-llama-cpp 3.21.1 packs it, and
// de3ff81 v0.5.0 (b11146) as 3.22.1 packs it.
func TestRulesForMeasuredBuilds(t *testing.T) {
	known := KnownEngines()
	for _, c := range []struct {
		build int
		k     Known
	}{{10809, known[0]}, {11146, known[1]}} {
		if got := RulesForBuild(c.build).Rules; got != c.k.Rules {
			t.Errorf("b%d: %+v, want %s's %+v", c.build, got, c.k.Commit, c.k.Rules)
		}
	}
}

// Each change flips its rule at its first build and not before.
func TestRulesForBuild(t *testing.T) {
	cases := []struct {
		build int
		rule  func(plan.Rules) bool
		want  bool
	}{
		{2539, func(r plan.Rules) bool { return r.NoOutIDs }, true},
		{2540, func(r plan.Rules) bool { return r.NoOutIDs }, false},
		{6048, func(r plan.Rules) bool { return r.OverrideCPUPlain }, true},
		{6049, func(r plan.Rules) bool { return r.OverrideCPUPlain }, false},
		{6070, func(r plan.Rules) bool { return r.KVCopy }, true},
		{6071, func(r plan.Rules) bool { return r.KVCopy }, false},
		{6459, func(r plan.Rules) bool { return r.NoMetalReorder }, true},
		{6460, func(r plan.Rules) bool { return r.NoMetalReorder }, false},
		{6500, func(r plan.Rules) bool { return r.MetalMappedOffset }, true},
		{6501, func(r plan.Rules) bool { return r.MetalMappedOffset }, false},
		{7818, func(r plan.Rules) bool { return r.NoEmbdSelect }, true},
		{7819, func(r plan.Rules) bool { return r.NoEmbdSelect }, false},
		{9409, func(r plan.Rules) bool { return r.MaskCast }, true},
		{9410, func(r plan.Rules) bool { return r.MaskCast }, false},
		{9459, func(r plan.Rules) bool { return r.ReserveAllOutputs }, true},
		{9460, func(r plan.Rules) bool { return r.ReserveAllOutputs }, false},
		{10750, func(r plan.Rules) bool { return r.NoCUDAReduceDeps }, true},
		{10751, func(r plan.Rules) bool { return r.NoCUDAReduceDeps }, false},
		{10828, func(r plan.Rules) bool { return r.GDNNormAsRMS }, false},
		{10829, func(r plan.Rules) bool { return r.GDNNormAsRMS }, true},
		{10874, func(r plan.Rules) bool { return r.LoadMode }, false},
		{10875, func(r plan.Rules) bool { return r.LoadMode }, true},
		{10906, func(r plan.Rules) bool { return r.NextNWithoutKV }, false},
		{10907, func(r plan.Rules) bool { return r.NextNWithoutKV }, true},
	}
	for _, c := range cases {
		if got := c.rule(RulesForBuild(c.build).Rules); got != c.want {
			t.Errorf("b%d: %v, want %v", c.build, got, c.want)
		}
	}
}

// A build inside a change's bounds gets the later rule and is told so;
// builds outside the table are told that too.
func TestRulesForBuildBounds(t *testing.T) {
	br := RulesForBuild(10850)
	if !br.Rules.VulkanFusion || len(br.Uncertain) == 0 || !strings.Contains(strings.Join(br.Uncertain, " "), "Vulkan") {
		t.Errorf("b10850: %+v", br)
	}
	if br := RulesForBuild(10900); len(br.Uncertain) != 1 || !strings.Contains(br.Uncertain[0], "top-k") {
		t.Errorf("b10900 should be uncertain only about the CUDA and Metal change: %q", br.Uncertain)
	}
	if br := RulesForBuild(6699); len(br.Uncertain) != 0 || br.Outside != "" || len(br.Predates) != 10 {
		t.Errorf("b6699: %+v", br)
	}
	if br := RulesForBuild(NewestRuled + 1); br.Outside == "" || br.Rules != KnownEngines()[1].Rules {
		t.Errorf("a build after v0.5.0: %+v", br)
	}
	if br := RulesForBuild(OldestRuled - 1); br.Outside == "" {
		t.Errorf("a build before b%d: %+v", OldestRuled, br)
	}
}

// A user's build is planned by its number unless headroom measured it;
// a packaged build that says "build 1" gets the newest measured figures.
func TestBuildNote(t *testing.T) {
	n := BuildNote(Build{Number: 6699, Commit: "c08002a1"})
	if n.Exact || n.Rules != RulesForBuild(6699).Rules || !strings.Contains(n.Says, "estimates") || n.Build != "b6699 (c08002a1)" {
		t.Errorf("b6699: %+v", n)
	}
	if n := BuildNote(Build{Number: 1, Release: "0.5.0-dev", Commit: "de3ff81"}); !n.Exact || n.Rules != KnownEngines()[1].Rules {
		t.Errorf("de3ff81 packaged: %+v", n)
	}
	if n := BuildNote(Build{Number: 1, Release: "0.9.0-dev", Commit: "1234567"}); n.Exact || n.Rules != Default().Rules {
		t.Errorf("an unknown packaged build: %+v", n)
	}
}
