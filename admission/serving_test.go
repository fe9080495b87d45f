package admission

import (
	"testing"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/synth"
)

// On a 24 GB machine without a GPU, as serve-api plans them (each against
// the machine with the earlier ones booked), the catalog's small models
// leave room for one another: each plan sizes its context by need and
// bounds its prompt cache, and the ledger books what each grows to while
// serving, so three load side by side with room to spare. Planned as
// llama.cpp's fit plans (context filling what is free), the first takes
// the machine.
func TestSmallModelsShareTheMachine(t *testing.T) {
	base, err := hw.LoadMachine("cpu-32")
	if err != nil {
		t.Fatal(err)
	}
	s := *base
	s.Domains = append([]hw.Domain(nil), base.Domains...)
	s.Domains[0].Capacity, s.Domains[0].Usable, s.Domains[0].Free = 24<<30, 0, nil
	models := []struct {
		shape string
		q     synth.Quant
	}{{"qwen3-0.6b", synth.Q8_0}, {"qwen3.5-0.8b", synth.Q8_0}, {"llama-3.2-1b", synth.Q4_K_M}}
	var l Ledger
	var booked int64
	for _, mm := range models {
		sh, _ := synth.Lookup(mm.shape)
		m, err := synth.Model(sh, mm.q)
		if err != nil {
			t.Fatal(err)
		}
		held, err := l.Held()
		if err != nil {
			t.Fatal(err)
		}
		all := map[string]int64{}
		for _, b := range held {
			for d, n := range b.Need {
				all[d] += n
			}
		}
		fresh := s.Holding(map[string]int64{}, all)
		p, err := plan.Search(m, fresh, plan.DefaultSearch())
		if err != nil || p.Chosen == nil {
			t.Fatalf("%s beside %d others: %v %v", mm.shape, len(held), err, p.Explain)
		}
		cpu, gpus := plan.Devices(fresh)
		r, err := plan.Account(m, p.Chosen.Profile, cpu, gpus)
		if err != nil {
			t.Fatal(err)
		}
		tk, err := l.Admit(mm.shape, r, fresh)
		if err != nil {
			t.Fatalf("%s: %v", mm.shape, err)
		}
		if err := tk.Started(); err != nil {
			t.Fatal(err)
		}
		booked += tk.Need["ram"]
		t.Logf("%s: %s, booked %.2f GiB", mm.shape, p.Chosen.Flags, float64(tk.Need["ram"])/(1<<30))
	}
	if left := int64(24<<30) - booked; left < 8<<30 {
		t.Errorf("three small models book %.1f GiB of 24: want at least 8 GiB left for the system and more", float64(booked)/(1<<30))
	}
	// llama.cpp's fit would give the first one all that is free.
	sh, _ := synth.Lookup("qwen3-0.6b")
	m, _ := synth.Model(sh, synth.Q8_0)
	o := plan.DefaultSearch()
	o.ContextByNeed = false
	if p, err := plan.Search(m, &s, o); err != nil || p.Chosen.CtxPerSlot != m.CtxTrain {
		t.Errorf("without context by need: %v %+v", err, p.Chosen)
	}
}
