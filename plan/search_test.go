package plan

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/synth"
)

func TestSearch(t *testing.T) {
	m8 := model(t, "llama-3.1-8b", synth.Q4_K_M)
	m70 := model(t, "llama-3.1-70b", synth.Q4_K_M)
	load := func(name string) *hw.Snapshot {
		s, err := hw.LoadMachine(name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Every chosen plan must fit with the fit target left free, as planned
	// again from its flags.
	check := func(name string, m *arch.Model, p *Plan, s *hw.Snapshot, o SearchOptions) {
		t.Helper()
		if p.Chosen == nil {
			t.Fatalf("%s: nothing chosen: %v", name, p.Explain)
		}
		a, err := Assess(m, nil, p.Chosen.Profile, s)
		if err != nil || a.Verdict != Fits || a.LeastMargin() < o.FitTarget {
			t.Errorf("%s: chosen %v does not fit with the target: %v", name, p.Chosen.Flags, a.Reason)
		}
	}

	o := DefaultSearch()
	s := load("rtx-4090")
	p, err := Search(m8, s, o)
	if err != nil {
		t.Fatal(err)
	}
	check("8B on a 4090", m8, p, s, o)
	if p.Chosen.GPULayers != 33 || p.Chosen.CtxPerSlot != 131072 || p.Chosen.Profile.CacheK != "q8_0" {
		t.Errorf("8B on a 4090: %v, %d per slot", p.Chosen.Flags, p.Chosen.CtxPerSlot)
	}
	// f16 is the runner-up, with less context: q8_0 was chosen because it
	// buys context.
	if p.RunnerUp == nil || p.RunnerUp.Profile.CacheK != "f16" || p.RunnerUp.CtxPerSlot >= p.Chosen.CtxPerSlot {
		t.Errorf("runner-up %+v", p.RunnerUp)
	}
	o.AllowQ8 = false
	p, _ = Search(m8, s, o)
	if p.Chosen.Profile.CacheK != "f16" || slices.Contains(p.Chosen.Flags, "q8_0") {
		t.Errorf("--no-q8 still proposes %v", p.Chosen.Flags)
	}

	// 70B does not fit a 24 GB card: some layers go to system memory.
	o = DefaultSearch()
	p, _ = Search(m70, s, o)
	check("70B on a 4090", m70, p, s, o)
	if p.Chosen.GPULayers <= 0 || p.Chosen.GPULayers >= 81 {
		t.Errorf("70B on a 4090: -ngl %d", p.Chosen.GPULayers)
	}

	// On a unified pool every layer stays on the GPU.
	mac := load("m4-max-128")
	p, _ = Search(m70, mac, o)
	check("70B on a 128 GB Mac", m70, p, mac, o)
	if p.Chosen.GPULayers != 81 {
		t.Errorf("70B on a Mac: -ngl %d", p.Chosen.GPULayers)
	}

	// Nothing fits a small machine.
	small := load("m4-16")
	p, _ = Search(m70, small, o)
	if p.Chosen != nil || len(p.Explain) == 0 {
		t.Errorf("70B on 16 GB chose %v", p.Chosen)
	}
}

// TestSearchHeadless plans on a recorded desktop machine whose compositor
// and browser hold 2415 MiB of the 4090: the plan counts that memory as
// taken, says what headless would allow, and --headless plans for it.
func TestSearchHeadless(t *testing.T) {
	s, err := hw.LoadMachine("../hw/testdata/probe/rtx4090-desktop/want.json")
	if err != nil {
		t.Fatal(err)
	}
	if s.Reserve() != 2415<<20 {
		t.Fatalf("fixture reserve %d MiB, want 2415", s.Reserve()>>20)
	}
	m70 := model(t, "llama-3.1-70b", synth.Q4_K_M)
	o := DefaultSearch()
	p, err := Search(m70, s, o)
	if err != nil || p.Chosen == nil {
		t.Fatalf("no plan: %v %v", err, p)
	}
	h := p.Headless
	if h == nil {
		t.Fatal("a machine with a desktop reserve got no headless plan")
	}
	// 2.4 GiB more of the card is room for more 70B layers.
	if h.GPULayers <= p.Chosen.GPULayers {
		t.Errorf("headless -ngl %d, desktop -ngl %d: the reserve bought nothing", h.GPULayers, p.Chosen.GPULayers)
	}
	if last := p.Explain[len(p.Explain)-1]; !strings.Contains(last, "2415 MiB") || !strings.Contains(last, "-ngl "+strconv.Itoa(h.GPULayers)) {
		t.Errorf("explanation does not say what headless buys: %q", last)
	}
	// The headless plan fits only without the desktop session (or the
	// desktop search left room unused).
	if a, _ := Assess(m70, nil, h.Profile, s); a.Verdict == Fits && a.LeastMargin() >= o.FitTarget {
		t.Errorf("headless %v already fits with the desktop running: the search left room unused", h.Flags)
	}
	if a, _ := Assess(m70, nil, h.Profile, s.Headless()); a.Verdict != Fits || a.LeastMargin() < o.FitTarget {
		t.Errorf("headless %v does not fit headless: %s", h.Flags, a.Reason)
	}
	o.Headless = true
	ph, err := Search(m70, s, o)
	if err != nil || ph.Chosen == nil {
		t.Fatalf("--headless: no plan: %v", err)
	}
	if ph.Headless != nil || !slices.Equal(ph.Chosen.Flags, h.Flags) {
		t.Errorf("--headless chose %v (headless field %v), want %v", ph.Chosen.Flags, ph.Headless, h.Flags)
	}
	t.Logf("desktop: %v; headless: %v", p.Chosen.Flags, h.Flags)
}

// TestSearchFixed keeps what the user set (-ngl, -c, -ctk, -ctv), searches
// the rest, and says so when the settings cannot fit.
func TestSearchFixed(t *testing.T) {
	s, err := hw.LoadMachine("rtx-4090")
	if err != nil {
		t.Fatal(err)
	}
	m70 := model(t, "llama-3.1-70b", synth.Q4_K_M)
	m8 := model(t, "llama-3.1-8b", synth.Q4_K_M)
	n := func(v int) *int { return &v }
	free, err := Search(m70, s, DefaultSearch())
	if err != nil || free.Chosen == nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		m     *arch.Model
		fixed Fixed
		check func(c *Candidate) bool
	}{
		{"fewer layers, more context", m70, Fixed{GPULayers: n(30)}, func(c *Candidate) bool {
			return c.GPULayers == 30 && c.CtxPerSlot > free.Chosen.CtxPerSlot
		}},
		{"fixed context", m70, Fixed{Ctx: 32768}, func(c *Candidate) bool {
			return c.Profile.Ctx == 32768 && c.CtxPerSlot == 16384 && slices.Contains(c.Flags, "32768") &&
				c.GPULayers < free.Chosen.GPULayers
		}},
		{"-ngl beyond the model is all", m8, Fixed{GPULayers: n(999)}, func(c *Candidate) bool {
			return c.GPULayers == 33
		}},
		{"q4_0 cache", m8, Fixed{CacheK: "q4_0", CacheV: "q4_0"}, func(c *Candidate) bool {
			return argsString(c.Flags) == "-c 262144 -np 2 -ngl 33 --fit off -fa on -ctk q4_0 -ctv q4_0"
		}},
		// A quantized K alone does not need flash attention.
		{"q8_0 K only", m8, Fixed{CacheK: "q8_0"}, func(c *Candidate) bool {
			return c.Profile.CacheV == "f16" && slices.Contains(c.Flags, "-ctk") && !slices.Contains(c.Flags, "-ctv") && !slices.Contains(c.Flags, "-fa")
		}},
	} {
		o := DefaultSearch()
		o.Fixed = tc.fixed
		p, err := Search(tc.m, s, o)
		if err != nil || p.Chosen == nil {
			t.Errorf("%s: no plan: %v %v", tc.name, err, p.Explain)
			continue
		}
		if !tc.check(p.Chosen) {
			t.Errorf("%s: chose %v (%d per slot)", tc.name, p.Chosen.Flags, p.Chosen.CtxPerSlot)
		}
		if a, _ := Assess(tc.m, nil, p.Chosen.Profile, s); a.Verdict != Fits || a.LeastMargin() < o.FitTarget {
			t.Errorf("%s: %v does not fit: %s", tc.name, p.Chosen.Flags, a.Reason)
		}
		if !strings.Contains(strings.Join(p.Explain, "\n"), "kept as given and checked: "+tc.fixed.flags()) {
			t.Errorf("%s: explanation does not name the kept settings: %v", tc.name, p.Explain)
		}
	}

	// Too many layers: nothing is chosen, and the plan says what would fit.
	o := DefaultSearch()
	o.Fixed = Fixed{GPULayers: n(70)}
	p, err := Search(m70, s, o)
	if err != nil || p.Chosen != nil {
		t.Fatalf("-ngl 70 of a 70B on 24 GB: %v %v", err, p.Chosen)
	}
	if why := strings.Join(p.Explain, "; "); !strings.Contains(why, "nothing fits with -ngl 70 as given") ||
		!strings.Contains(why, "without those settings the plan would be: "+argsString(free.Chosen.Flags)) {
		t.Errorf("explanation: %s", why)
	}

	for _, bad := range []Fixed{{CacheK: "q3"}, {CacheV: "f8"}, {Ctx: -1}, {GPULayers: n(-3)}} {
		o.Fixed = bad
		if _, err := Search(m8, s, o); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestSearchGoalContext: the most context first, then as many GPU layers
// as fit beside it, never -ngl 0 where a layer fits at the same context.
func TestSearchGoalContext(t *testing.T) {
	m70 := model(t, "llama-3.1-70b", synth.Q4_K_M)
	m8 := model(t, "llama-3.1-8b", synth.Q4_K_M)
	for _, c := range []struct {
		machine string
		m       *arch.Model
		name    string
	}{{"rtx-4090", m70, "70B"}, {"rtx-3060-12", m70, "70B"}, {"rtx-3060-12", m8, "8B"}} {
		s, err := hw.LoadMachine(c.machine)
		if err != nil {
			t.Fatal(err)
		}
		o := DefaultSearch()
		o.Goal, o.Parallel = GoalContext, 1
		p, err := Search(c.m, s, o)
		if err != nil || p.Chosen == nil {
			t.Fatalf("%s on %s: %v %v", c.name, c.machine, err, p)
		}
		got := p.Chosen
		more := got.Profile
		more.GPULayers = got.GPULayers + 1
		if got.GPULayers >= c.m.NLayer+1 {
			continue
		}
		a, err := Assess(c.m, nil, more, s)
		if err != nil {
			t.Fatal(err)
		}
		if a.Verdict == Fits && a.LeastMargin() >= o.FitTarget {
			t.Errorf("%s on %s, --goal context: chose %v, but -ngl %d fits at the same context", c.name, c.machine, got.Flags, more.GPULayers)
		}
		if got.GPULayers == 0 {
			t.Errorf("%s on %s, --goal context: -ngl 0 (%v)", c.name, c.machine, got.Flags)
		}
	}
}

// A -c past the trained context is capped in the plan, and it says so.
func TestSearchCapsTrainedContext(t *testing.T) {
	m := model(t, "qwen3-8b", synth.Q4_K_M)
	s, err := hw.LoadMachine("cpu-32")
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultSearch()
	o.Parallel, o.Fixed.Ctx = 2, 1000000
	p, err := Search(m, s, o)
	if err != nil || p.Chosen == nil {
		t.Fatalf("%v %+v", err, p)
	}
	if p.Chosen.Profile.Ctx != 2*40960 || p.Chosen.CtxPerSlot > 40960 {
		t.Errorf("chose %v (%d per slot), want -c %d", p.Chosen.Flags, p.Chosen.CtxPerSlot, 2*40960)
	}
	if len(p.Explain) == 0 || !strings.HasPrefix(p.Explain[0], "-c 1000000 is capped at 81920") {
		t.Errorf("explain %q", p.Explain)
	}
}
