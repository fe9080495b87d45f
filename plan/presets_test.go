package plan

import (
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/synth"
)

// For every model shape the conformance suite measures (and the others
// synth knows) on every machine preset, what the plan chooses fits by the
// accountant with the fit target free in every domain, assessed again from
// its profile alone.
func TestPlanFitsEveryPreset(t *testing.T) {
	if testing.Short() {
		t.Skip("plans every shape on every preset")
	}
	presets := hw.Presets()
	chosen, none := 0, 0
	for _, name := range synth.Names() {
		s, _ := synth.Lookup(name)
		if !arch.Modeled(s.Arch) {
			continue // written for goldens ahead of its model (plan/graph's otherArch says why)
		}
		q := synth.Q4_K_M
		if s.Arch == "gpt-oss" {
			q = synth.MXFP4_MOE
		}
		m, err := synth.Model(s, q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, preset := range presets {
			snap, err := hw.LoadMachine(preset.Name)
			if err != nil {
				t.Fatal(err)
			}
			o := DefaultSearch()
			p, err := Search(m, snap, o)
			if err != nil {
				t.Errorf("%s on %s: %v", name, preset.Name, err)
				continue
			}
			if p.Chosen == nil {
				none++
				if len(p.Explain) == 0 {
					t.Errorf("%s on %s: nothing chosen and nothing said", name, preset.Name)
				}
				continue
			}
			chosen++
			a, err := Assess(m, nil, p.Chosen.Profile, snap)
			if err != nil || a.Verdict != Fits || a.LeastMargin() < o.FitTarget {
				t.Errorf("%s on %s: %v does not keep %d MiB free: %v %v", name, preset.Name, p.Chosen.Flags, o.FitTarget>>20, err, a.Reason)
			}
		}
	}
	if chosen == 0 || none == 0 {
		t.Errorf("%d plans chosen, %d machines where nothing fits: the presets should have both", chosen, none)
	}
	t.Logf("%d shapes x %d presets: %d plans, %d with nothing that fits", len(synth.Names()), len(presets), chosen, none)
}
