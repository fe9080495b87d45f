package plan

import (
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/synth"
)

// Every architecture builds and is accounted under the older builds'
// graph rules, with flash attention on and off and layers on a GPU.
func TestOlderRulesEveryShape(t *testing.T) {
	old := measuredRules(t, "80fb11a", func(r *builds.Rules) {
		r.KVSetRows, r.OutIDs, r.QKVViews, r.MaskF16, r.EmbdSelect, r.OutputRows = false, false, false, false, false, 512
	})
	now := measuredRules(t, "80fb11a")
	cpu := Device{Name: "CPU", Backend: "CPU"}
	gpus := []Device{{Name: "CUDA0", Backend: "CUDA", Free: 80 << 30}}
	for _, name := range synth.Names() {
		s, _ := synth.Lookup(name)
		if !arch.Modeled(s.Arch) {
			continue // written for goldens ahead of its model (plan/graph's otherArch says why)
		}
		m := shapeQuantModel(t, s, synth.Q4_K_M)
		for _, fa := range []FlashAttn{FlashOff, FlashOn} {
			p := Defaults()
			p.Ctx, p.FlashAttn, p.GPULayers, p.Rules = 4096, fa, 99, &old
			q := p
			q.Rules = &now
			now, err := Account(m, q, cpu, gpus)
			if err != nil {
				t.Fatalf("%s fa %v: %v", name, fa, err)
			}
			then, err := Account(m, p, cpu, gpus)
			if err != nil {
				t.Fatalf("%s fa %v, older rules: %v", name, fa, err)
			}
			if len(then.Buffers) != len(now.Buffers) {
				t.Errorf("%s fa %v: %d buffers under the older rules, %d now", name, fa, len(then.Buffers), len(now.Buffers))
			}
		}
	}
}
