package plan

import (
	"testing"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/synth"
)

// Every preset gets a verdict for models of several sizes, and every fix
// proposed for a profile that does not fit is checked by applying it and
// planning again.
func TestPresetsAndFixes(t *testing.T) {
	models := map[string]synth.Quant{"tinyllama-1.1b": synth.Q8_0, "llama-3.1-8b": synth.Q4_K_M, "llama-3.1-70b": synth.Q4_K_M}
	verdicts := map[string]int{}
	for _, preset := range hw.Presets() {
		s, err := hw.LoadMachine(preset.Name)
		if err != nil {
			t.Fatal(err)
		}
		for shape, q := range models {
			sh, _ := synth.Lookup(shape)
			m := shapeQuantModel(t, sh, q)
			p := Defaults()
			p.Parallel, p.KVUnified = 4, true // llama-server's -np auto
			a, err := Assess(m, nil, p, s)
			if err != nil {
				t.Fatalf("%s %s: %v", preset.Name, shape, err)
			}
			verdicts[a.Verdict]++
			if len(a.Domains) != len(s.Domains) || a.Reason == "" {
				t.Errorf("%s %s: %d domains for %d, reason %q", preset.Name, shape, len(a.Domains), len(s.Domains), a.Reason)
			}
			if a.Verdict == Fits {
				if len(a.Fixes) != 0 {
					t.Errorf("%s %s fits but proposes fixes", preset.Name, shape)
				}
				continue
			}
			if len(a.Fixes) == 0 {
				t.Errorf("%s %s: %s and no fix proposed", preset.Name, shape, a.Verdict)
			}
			for _, f := range a.Fixes {
				if len(f.Flags) == 0 {
					continue
				}
				q, err := f.Apply(p)
				if err != nil {
					t.Fatal(err)
				}
				again, err := Assess(m, nil, q, s)
				if err != nil || again.Verdict != Fits {
					t.Errorf("%s %s: fix %v (%s) gives %s: %s", preset.Name, shape, f.Flags, f.Says, again.Verdict, again.Reason)
				}
			}
		}
	}
	if verdicts[Fits] == 0 || verdicts[DoesNotFit] == 0 {
		t.Errorf("verdicts %v: the presets should include machines where models fit and where they do not", verdicts)
	}
	t.Logf("verdicts over %d presets x %d models: %v", len(hw.Presets()), len(models), verdicts)
}
