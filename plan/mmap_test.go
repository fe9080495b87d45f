package plan

import (
	"github.com/headroom-llm/headroom/builds"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/synth"
)

// outputFirst is m as a file that stores output.weight before every other
// tensor (some converters do), the other tensors shifted after it.
func outputFirst(t *testing.T, m *arch.Model) *arch.Model {
	t.Helper()
	out := *m
	out.Tensors = slices.Clone(m.Tensors)
	i := slices.IndexFunc(out.Tensors, func(x arch.Tensor) bool { return x.Name == "output.weight" })
	if i < 0 {
		t.Fatal("no output.weight")
	}
	first := out.Tensors[0].FileOffset
	size := int64(out.Tensors[i].Size)
	for j := range out.Tensors {
		if j == i {
			out.Tensors[j].FileOffset = first
		} else if out.Tensors[j].FileOffset < out.Tensors[i].FileOffset {
			out.Tensors[j].FileOffset += size
		}
	}
	return &out
}

// Metal maps the span between its first and last tensor in the file, not
// their sum: the whole file when the output weight it holds comes first.
func TestMetalMappedSpan(t *testing.T) {
	m := model(t, "qwen3-8b", synth.Q4_K_M)
	var file int64
	for _, tn := range m.Tensors {
		file = max(file, tn.FileOffset+int64(tn.Size))
	}
	file -= m.Tensors[0].FileOffset
	cpu := Device{Name: "CPU", Backend: "CPU"}
	metal := []Device{{Name: "MTL0", Backend: "Metal", Free: 12 << 30}}
	metalModel := func(m *arch.Model, ngl int, mmap bool) (buft string, bytes int64) {
		p := Defaults()
		p.GPULayers, p.Mmap = ngl, mmap
		r, err := Place(m, p, cpu, metal)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range r.Buffers {
			if b.Device == "MTL0" && b.Kind == "model" {
				buft, bytes = b.BufferType, bytes+b.Bytes
			}
		}
		return buft, bytes
	}
	_, loaded := metalModel(m, 3, false)
	buft, mapped := metalModel(m, 3, true)
	if buft != "MTL0_Mapped" || mapped < loaded || mapped > loaded*11/10 {
		t.Errorf("-ngl 3 with the output last: %s %d bytes, %d loaded", buft, mapped, loaded)
	}
	buft, mapped = metalModel(outputFirst(t, m), 3, true)
	// From the output weight at the start to the last layer at the end:
	// the whole file, for three layers' worth of weights.
	if buft != "MTL0_Mapped" || mapped != file {
		t.Errorf("-ngl 3 with the output first: %s %d bytes, want the whole file, %d", buft, mapped, file)
	}
}

// The plan says --no-mmap where the mapped span would waste the memory a
// better plan needs, and not where it would not.
func TestPlanNoMmapOnMetal(t *testing.T) {
	m := model(t, "qwen3-8b", synth.Q4_K_M)
	s, err := hw.LoadMachine("m4-16")
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultSearch()
	ngl := 3
	o.Fixed.GPULayers = &ngl
	p, err := Search(m, s, o)
	if err != nil || p.Chosen == nil {
		t.Fatalf("%v %+v", err, p)
	}
	unmapped := func(flags []string) bool {
		return slices.Contains(flags, "--no-mmap") || slices.Contains(flags, "--load-mode")
	}
	if unmapped(p.Chosen.Flags) {
		t.Errorf("output stored last: %v, want the file mapped", p.Chosen.Flags)
	}
	p2, err := Search(outputFirst(t, m), s, o)
	if err != nil || p2.Chosen == nil {
		t.Fatalf("%v %+v", err, p2)
	}
	if !unmapped(p2.Chosen.Flags) || p2.Chosen.CtxPerSlot < p.Chosen.CtxPerSlot {
		t.Errorf("output stored first: %v with %d cells per slot; mapped it was %d", p2.Chosen.Flags, p2.Chosen.CtxPerSlot, p.Chosen.CtxPerSlot)
	}
	said := false
	for _, line := range p2.Explain {
		said = said || strings.HasPrefix(line, "--no-mmap: with the file mapped, Metal would keep")
	}
	if !said {
		t.Errorf("no reason given for --no-mmap: %v", p2.Explain)
	}
}

// fit's advice offers --no-mmap where the mapped span is what does not
// fit (Metal keeps it all resident), and the fix applies.
func TestFitOffersNoMmap(t *testing.T) {
	m := outputFirst(t, model(t, "qwen3-8b", synth.Q4_K_M))
	s, err := hw.LoadMachine("m4-16")
	if err != nil {
		t.Fatal(err)
	}
	p := Defaults()
	p.GPULayers, p.Ctx, p.Parallel = 3, 32768, 1
	// No prompt cache (-cram 0): its 8 GiB would not fit a 16 GB Mac
	// whatever the mapping.
	sv := ServerServing()
	sv.CacheRAM = 0
	p.Serving = &sv
	a, err := Assess(m, nil, p, s)
	if err != nil {
		t.Fatal(err)
	}
	if a.Verdict != DoesNotFit {
		t.Fatalf("mapped, 32768 cells: %s, want it short (the whole file mapped on Metal)", a.Reason)
	}
	var fix *Fix
	for i := range a.Fixes {
		if a.Fixes[i].Change.NoMmap {
			fix = &a.Fixes[i]
		}
	}
	// The newest build refuses --no-mmap; its flag for the same load is
	// --load-mode none.
	if fix == nil || !slices.Equal(fix.Flags, []string{"--load-mode", "none"}) {
		t.Fatalf("no fix that loads instead of mapping, as --load-mode none: %+v", a.Fixes)
	}
	q, err := fix.Apply(p)
	if err != nil || q.Mmap {
		t.Fatalf("apply %v: %+v %v", fix.Flags, q, err)
	}
	if b, _ := Assess(m, nil, q, s); b.Verdict != Fits {
		t.Errorf("with --no-mmap: %s", b.Reason)
	}
	// On the CPU the pages of weights repacked from the mapped file are
	// not charged, so mapping costs no more than loading: no such fix.
	cpu, err := hw.LoadMachine("cpu-32")
	if err != nil {
		t.Fatal(err)
	}
	big := model(t, "llama-3.1-70b", synth.Q4_K_M)
	p = Defaults()
	p.Ctx, p.Parallel = 131072, 1
	a, err = Assess(big, nil, p, cpu)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range a.Fixes {
		if slices.Contains(f.Flags, "--no-mmap") {
			t.Errorf("CPU: offered %v (%s)", f.Flags, f.Says)
		}
	}
}

// Builds before llama.cpp PR #15995 printed a Metal mapped buffer with its
// start's offset into the 16 KiB page added (without MetalMappedSpan); the CPU's
// mapped span is printed as it is under either rule.
func TestMetalMappedOffset(t *testing.T) {
	m := model(t, "qwen3-8b", synth.Q4_K_M)
	cpu := Device{Name: "CPU", Backend: "CPU"}
	metal := []Device{{Name: "MTL0", Backend: "Metal", Free: 12 << 30}}
	spans := func(r builds.Rules) map[string]int64 {
		p := Defaults()
		p.GPULayers, p.Rules = 99, &r
		res, err := Place(m, p, cpu, metal)
		if err != nil {
			t.Fatal(err)
		}
		return byType(res.Buffers, KindModel)
	}
	// The first weight Metal holds starts its span.
	first := int64(-1)
	for _, tn := range m.Tensors {
		if tn.Name != "token_embd.weight" && (first < 0 || tn.FileOffset < first) {
			first = tn.FileOffset
		}
	}
	now, old := spans(measuredRules(t, "80fb11a")), spans(measuredRules(t, "80fb11a", func(r *builds.Rules) { r.MetalMappedSpan = false }))
	if first%MetalPage == 0 {
		t.Fatalf("the span starts on a page boundary (%d), which tests nothing", first)
	}
	if got, want := old["MTL0_Mapped"]-now["MTL0_Mapped"], first%MetalPage; got != want {
		t.Errorf("the older build's MTL0_Mapped is %d bytes over the span, want the start's page offset %d", got, want)
	}
	if old["CPU_Mapped"] != now["CPU_Mapped"] || now["CPU_Mapped"] == 0 {
		t.Errorf("CPU_Mapped %d under the older rule, %d now: the rule is Metal's", old["CPU_Mapped"], now["CPU_Mapped"])
	}
}
