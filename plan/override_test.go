package plan

import (
	"encoding/json"
	"github.com/headroom-llm/headroom/builds"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/synth"
)

func TestParseOverrides(t *testing.T) {
	cases := []struct {
		in   []string
		want []string // PATTERN=BUFT each; nil for an error
		err  string
	}{
		{[]string{`blk\.[0-9]+\.ffn_.*_exps=CPU`}, []string{`blk\.[0-9]+\.ffn_.*_exps=CPU`}, ""},
		{[]string{"a=CPU,b=CUDA0", "c=Vulkan0"}, []string{"a=CPU", "b=CUDA0", "c=Vulkan0"}, ""},
		{[]string{"a=b=c"}, []string{"a=b=c"}, ""}, // the first = splits, as llama.cpp's find('=')
		{[]string{"noequals"}, nil, "want PATTERN=BUFFER_TYPE"},
		{[]string{"=CPU"}, nil, "want PATTERN=BUFFER_TYPE"},
		{[]string{"x="}, nil, "want PATTERN=BUFFER_TYPE"},
		{[]string{"a=CPU,"}, nil, "want PATTERN=BUFFER_TYPE"},
		{[]string{"(unclosed=CPU"}, nil, "not a regular expression"},
	}
	for _, c := range cases {
		got, err := ParseOverrides(c.in...)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		var s []string
		for _, o := range got {
			s = append(s, o.String())
		}
		if !slices.Equal(s, c.want) {
			t.Errorf("%q: %q, want %q", c.in, s, c.want)
		}
	}
	// JSON carries an override as -ot spells it, and reads it back
	// compiled.
	in, _ := ParseOverrides(`blk\.0\.=CUDA0`)
	b, err := json.Marshal(in)
	if err != nil || string(b) != `["blk\\.0\\.=CUDA0"]` {
		t.Fatalf("%s %v", b, err)
	}
	var back []Override
	if err := json.Unmarshal(b, &back); err != nil || len(back) != 1 || !back[0].Matches("blk.0.attn_q.weight") || back[0].Matches("blk.10.attn_q.weight") {
		t.Errorf("round trip %+v %v", back, err)
	}
	if err := json.Unmarshal([]byte(`["nope"]`), &back); err == nil {
		t.Error("a malformed override decoded")
	}
}

func FuzzParseOverrides(f *testing.F) {
	for _, s := range []string{`blk\.[0-9]+\.ffn_.*_exps=CPU`, "a=CPU,b=CUDA0", "=", ",", "(=x", "a=b=c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		os, err := ParseOverrides(s)
		if err != nil {
			return
		}
		// What parses prints back to what parses to the same overrides.
		again, err := ParseOverrides(overrideFlag(os))
		if err != nil || len(again) != len(os) {
			t.Fatalf("%q re-parsed from %q: %v %v", s, overrideFlag(os), again, err)
		}
		for i := range os {
			if os[i].Pattern != again[i].Pattern || os[i].Buft != again[i].Buft {
				t.Fatalf("%q: %v then %v", s, os[i], again[i])
			}
		}
	})
}

// Where an override puts a weight: a GPU's buffer type as named; the CPU's
// as a weight of a CPU layer is placed (the GPU's pinned host buffer, the
// mapped file under mmap, a repack buffer on a CPU-only machine).
func TestOverridePlacement(t *testing.T) {
	m := model(t, "qwen3-30b-a3b", synth.Q4_K_M)
	cpu := Device{Name: "CPU", Backend: "CPU", Features: []string{"avx2"}}
	cuda := []Device{{Name: "CUDA0", Backend: "CUDA", Free: 24 << 30}}
	exps, _ := ParseOverrides(`ffn_(up|down|gate)_exps=CPU`)
	attn, _ := ParseOverrides(`attn_q\.weight=CUDA0`)
	cases := []struct {
		name string
		gpus []Device
		ngl  int
		ot   []Override
		mmap bool
		// older: the rule of builds before b6049 (without Rules.OverrideCPUExtra)
		older bool
		// the buffer type of blk.3.ffn_up_exps.weight and blk.3.attn_q.weight
		exps, q string
	}{
		{"experts to the CPU, mmap", cuda, GPULayersAuto, exps, true, false, "CPU_Mapped", "CUDA0"},
		{"experts to the CPU, no mmap: pinned host memory", cuda, GPULayersAuto, exps, false, false, "CUDA_Host", "CUDA0"},
		{"experts to the CPU, no GPU: repacked", nil, 0, exps, true, false, "CPU_REPACK", "CPU_REPACK"},
		{"a CPU layer's projection to the GPU", cuda, 0, attn, true, false, "CPU_Mapped", "CUDA0"},
		{"before b6049, experts to the CPU, mmap", cuda, GPULayersAuto, exps, true, true, "CPU_Mapped", "CUDA0"},
		{"before b6049, experts to the CPU, no mmap: plain CPU memory", cuda, GPULayersAuto, exps, false, true, "CPU", "CUDA0"},
		{"before b6049, experts to the CPU, no GPU: not repacked", nil, 0, exps, true, true, "CPU_Mapped", "CPU_REPACK"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Defaults()
			p.GPULayers, p.Overrides, p.Mmap = c.ngl, c.ot, c.mmap
			r := measuredRules(t, "80fb11a", func(r *builds.Rules) { r.OverrideCPUExtra = !c.older })
			p.Rules = &r
			layerDev := placeLayers(m.NLayer, p.GPULayers, nil, c.gpus, cpu.Name)
			ld := newLoader(m, p, cpu, c.gpus, layerDev)
			got := map[string]string{}
			for _, tn := range m.Tensors {
				if tn.Name == "blk.3.ffn_up_exps.weight" || tn.Name == "blk.3.attn_q.weight" {
					got[tn.Name] = ld.buffer(tn).buft
				}
			}
			if got["blk.3.ffn_up_exps.weight"] != c.exps || got["blk.3.attn_q.weight"] != c.q {
				t.Errorf("experts in %s, Q in %s; want %s and %s", got["blk.3.ffn_up_exps.weight"], got["blk.3.attn_q.weight"], c.exps, c.q)
			}
		})
	}
}

// A search keeps the user's overrides in every candidate and in its flags,
// and does not add --n-cpu-moe to them.
func TestSearchKeepsOverrides(t *testing.T) {
	m := model(t, "qwen3-30b-a3b", synth.Q4_K_M)
	s, err := hw.LoadMachine("rtx-5070")
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultSearch()
	o.Base.Overrides, _ = ParseOverrides(`blk\.([0-9]|[1-3][0-9])\.ffn_(up|down|gate)_exps=CPU`)
	p, err := Search(m, s, o)
	if err != nil || p.Chosen == nil {
		t.Fatalf("%v %+v", err, p)
	}
	i := slices.Index(p.Chosen.Flags, "-ot")
	if i < 0 || p.Chosen.Flags[i+1] != o.Base.Overrides[0].String() || slices.Contains(p.Chosen.Flags, "--n-cpu-moe") {
		t.Errorf("flags %v", p.Chosen.Flags)
	}
	for _, c := range p.Candidates {
		if len(c.Profile.Overrides) != 1 {
			t.Errorf("candidate %v lost the override", c.Flags)
		}
	}
	a, err := Assess(m, nil, p.Chosen.Profile, s)
	if err != nil || a.Verdict != Fits || a.LeastMargin() < o.FitTarget {
		t.Errorf("chosen %v: %v", p.Chosen.Flags, a.Reason)
	}
}
