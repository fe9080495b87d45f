package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/synth"
)

// servingOf finds one kind among a result's serving rows.
func servingOf(bufs []Buffer, kind BufferKind) (Buffer, bool) {
	for _, b := range bufs {
		if b.Kind == kind {
			return b, true
		}
	}
	return Buffer{}, false
}

func withServing(p Profile, f func(*Serving)) Profile {
	sv := ServerServing()
	f(&sv)
	p.Serving = &sv
	return p
}

// A sequence's state is its KV rows per token (Qwen3-0.6B: 28 layers of
// 8 KV heads of 128, K and V in f16, 112 KiB a token: the 164 MiB per
// 1,500-token prompt measured with llama-server), plus a few bytes of
// each cell's position and ids; a checkpoint of a dense model is empty.
func TestSeqState(t *testing.T) {
	m := model(t, "qwen3-0.6b", synth.Q8_0)
	p := Defaults()
	p.Ctx, p.GPULayers = 8192, 0
	r, err := Account(m, p, Device{Name: "CPU", Backend: "CPU"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := seqStateOf(m, r.Context, p)
	if st.perToken != 28*2*8*128*2 || st.swaPerToken != 0 || st.fixed != 0 {
		t.Fatalf("state %+v, want 114688 bytes a token and nothing fixed", st)
	}
	if got := st.full(1500) >> 20; got != 164 {
		t.Errorf("a 1500-token prompt: %d MiB, want 164", got)
	}
	if needsCheckpoints(m, false) {
		t.Error("a dense model makes no checkpoints")
	}
	// Gemma 3: sliding layers keep at most the window in a state, and a
	// checkpoint is that window; with --swa-full none is made.
	g := model(t, "gemma-3-1b", synth.Q8_0)
	gs := seqStateOf(g, r.Context, p)
	if gs.swaPerToken == 0 || gs.window != 512 {
		t.Fatalf("gemma state %+v, want sliding rows and a 512 window", gs)
	}
	if gs.partial(4096) != gs.partial(512) || gs.partial(4096) < 512*gs.swaPerToken {
		t.Errorf("a checkpoint of 4096 tokens (%d) is not the window's (%d)", gs.partial(4096), gs.partial(512))
	}
	if !needsCheckpoints(g, false) || needsCheckpoints(g, true) {
		t.Error("checkpoints: want them for sliding layers unless --swa-full")
	}
	// Mamba 2: every state the same size, whatever the prompt.
	mb := model(t, "mamba2-130m", synth.Q8_0)
	ms := seqStateOf(mb, r.Context, p)
	if ms.perToken != 0 || ms.fixed == 0 || ms.full(10) != ms.full(4000) {
		t.Errorf("mamba state %+v", ms)
	}
}

// The checkpoints a slot can hold: the three a task makes near its end
// and at its last message, and the spaced ones of this task and earlier
// ones, at most -ctxcp.
func TestCheckpointsPerSlot(t *testing.T) {
	for _, c := range []struct{ ctxcp, cms, cells, want int }{
		{32, 8192, 4096, 5},
		{32, 8192, 8192, 5},
		{32, 8192, 8193, 7},
		{32, 8192, 65536, 2*8 + 3},
		{32, 0, 65536, 32},
		{4, 8192, 4096, 4},
		{0, 8192, 4096, 0},
	} {
		sv := Serving{Checkpoints: c.ctxcp, CheckpointMinStep: c.cms}
		if got := checkpointsPerSlot(sv, c.cells, false); got != c.want {
			t.Errorf("-ctxcp %d -cms %d, %d cells: %d, want %d", c.ctxcp, c.cms, c.cells, got, c.want)
		}
		// Since PR #28302 a conversation keeps -ctxcp of them.
		if got := checkpointsPerSlot(sv, c.cells, true); got != c.ctxcp {
			t.Errorf("-ctxcp %d, checkpoints kept to the cap: %d", c.ctxcp, got)
		}
	}
}

// What llama-server keeps past the load, by -cram: its bound, none, or
// with no limit up to n_ctx tokens; a program that keeps none has no rows.
func TestServingBuffers(t *testing.T) {
	m := model(t, "qwen3-0.6b", synth.Q8_0)
	cpu := Device{Name: "CPU", Backend: "CPU"}
	p := Defaults()
	p.Ctx, p.Parallel, p.GPULayers = 8192, 1, 0
	for _, c := range []struct {
		cram      int
		cache     int64
		hasCache  bool
		processes bool
	}{
		{8192, 8192 << 20, true, true},
		{512, 512 << 20, true, true},
		{0, 0, false, true},
	} {
		r, err := Account(m, withServing(p, func(s *Serving) { s.CacheRAM = c.cram }), cpu, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, ok := servingOf(r.Serving, KindPromptCache)
		if ok != c.hasCache || b.Bytes != c.cache {
			t.Errorf("-cram %d: prompt cache %+v, want %d bytes", c.cram, b, c.cache)
		}
		if _, ok := servingOf(r.Serving, KindProcess); !ok {
			t.Errorf("-cram %d: no process row", c.cram)
		}
		if _, ok := servingOf(r.Serving, KindCheckpoints); ok {
			t.Errorf("-cram %d: checkpoints for a dense model", c.cram)
		}
	}
	// No limit: n_ctx tokens of states and one more prompt.
	r, err := Account(m, withServing(p, func(s *Serving) { s.CacheRAM = -1 }), cpu, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := servingOf(r.Serving, KindPromptCache)
	if want := int64(8192+8192) * 114688; b.Bytes < want || b.Bytes > want*11/10 {
		t.Errorf("-cram -1: %d bytes, want about %d", b.Bytes, want)
	}
	// A library context keeps nothing past its load.
	q := p
	q.Program = ProgramLibrary
	q.SWAFull = true
	if r, err := Account(m, q, cpu, nil); err != nil || len(r.Serving) != 0 {
		t.Errorf("library: %v %+v", err, r.Serving)
	}
	// A hybrid model's slots keep checkpoints of their recurrent state.
	h := model(t, "qwen3.5-0.8b", synth.Q8_0)
	p.Parallel = 2
	r, err = Account(h, withServing(p, func(s *Serving) { s.CacheRAM = 0 }), cpu, nil)
	if err != nil {
		t.Fatal(err)
	}
	ck, ok := servingOf(r.Serving, KindCheckpoints)
	st := seqStateOf(h, r.Context, p)
	if !ok || ck.Bytes != int64(2*32)*st.partial(r.Context.NCtxSeq) {
		t.Errorf("qwen3.5 checkpoints %+v, want 2 slots x 32 of %d", ck, st.partial(r.Context.NCtxSeq))
	}
	// Before PR #28302 (80fb11a, b10809) five at most at 8192 cells.
	old := builds.For(10809)
	p.Rules = &old
	r, err = Account(h, withServing(p, func(s *Serving) { s.CacheRAM = 0 }), cpu, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ck, _ := servingOf(r.Serving, KindCheckpoints); ck.Bytes != int64(2*5)*st.partial(r.Context.NCtxSeq) {
		t.Errorf("qwen3.5 checkpoints at b10809 %+v, want 2 slots x 5 of %d", ck, st.partial(r.Context.NCtxSeq))
	}
}

// fit of llama-server's defaults counts the 8 GiB prompt cache: a
// profile that fits at load and not while serving says so, names the
// prompt cache, and offers the largest -cram that fits, which does.
func TestDoesNotFitWhileServing(t *testing.T) {
	m := model(t, "qwen3-8b", synth.Q4_K_M)
	s, err := hw.LoadMachine("cpu-32")
	if err != nil {
		t.Fatal(err)
	}
	p := Defaults()
	// Four slots of the trained 40960: 22.5 GiB of KV beside 4.7 GiB of
	// weights loads in 32 GiB; the prompt cache's 8 GiB does not fit.
	p.Ctx, p.Parallel, p.GPULayers = 4*40960, 4, 0
	p.Serving = nil // llama-server's defaults
	a, err := Assess(m, nil, p, s)
	if err != nil {
		t.Fatal(err)
	}
	if a.Verdict != DoesNotFit || !strings.Contains(a.Reason, "does not fit while serving") || !strings.Contains(a.Reason, "prompt cache of up to 8192.00 MiB") {
		t.Fatalf("verdict %s: %s", a.Verdict, a.Reason)
	}
	for _, d := range a.Load {
		if d.Margin < 0 {
			t.Errorf("the load itself does not fit: %+v", d)
		}
	}
	var fix *Fix
	for i := range a.Fixes {
		if a.Fixes[i].Flags[0] == "-cram" {
			fix = &a.Fixes[i]
		}
	}
	if fix == nil {
		t.Fatalf("no -cram fix: %+v", a.Fixes)
	}
	q, err := fix.Apply(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Assess(m, nil, q, s)
	if err != nil || b.Verdict != Fits {
		t.Fatalf("%v: %s %v", fix.Flags, b.Reason, err)
	}
	// One MiB more does not fit: the fix is the largest.
	q.Serving.CacheRAM++
	if c, _ := Assess(m, nil, q, s); c.Verdict == Fits {
		t.Errorf("-cram %d fits too: the fix %v is not the largest", q.Serving.CacheRAM, fix.Flags)
	}
	// -cram 0 takes the cache out.
	if c, _ := Assess(m, nil, withServing(p, func(s *Serving) { s.CacheRAM = 0 }), s); c.Verdict != Fits {
		t.Errorf("-cram 0: %s", c.Reason)
	}
}

// On system memory the balanced plan sizes context by need (the caches
// as large as the weights, at least --min-ctx) and gives the prompt cache
// every slot's whole context; the context goal, or a GPU holding the
// model, fills what is free.
func TestPlanContextByNeed(t *testing.T) {
	m := model(t, "qwen3-0.6b", synth.Q8_0)
	s, err := hw.LoadMachine("cpu-32")
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultSearch()
	p, err := Search(m, s, o)
	if err != nil || p.Chosen == nil {
		t.Fatalf("%v %+v", err, p)
	}
	c := p.Chosen
	if c.CtxPerSlot != 4096 {
		t.Errorf("qwen3-0.6b on cpu-32: %d cells per slot, want the 4096 minimum (its caches pass its weights sooner)", c.CtxPerSlot)
	}
	sv, _ := c.Profile.ServingOf()
	if st := seqStateOf(m, *c.Result.Resolved, c.Profile); sv.CacheRAM != int((2*st.full(4096)+1<<20-1)>>20) {
		t.Errorf("-cram %d, want two whole slots' states", sv.CacheRAM)
	}
	if !slices.Contains(c.Flags, "-cram") {
		t.Errorf("flags %v name no prompt cache", c.Flags)
	}
	said := 0
	for _, l := range p.Explain {
		if strings.HasPrefix(l, "context by need") || strings.HasPrefix(l, "memory while serving") {
			said++
		}
	}
	if said != 2 {
		t.Errorf("explain %q", p.Explain)
	}
	o.Goal = GoalContext
	if q, _ := Search(m, s, o); q.Chosen.CtxPerSlot != m.CtxTrain {
		t.Errorf("--goal context: %d cells per slot, want the trained %d", q.Chosen.CtxPerSlot, m.CtxTrain)
	}
	// A larger model gets more context, as much as its weights.
	l := model(t, "llama-3.2-1b", synth.Q4_K_M)
	if q, _ := Search(l, s, DefaultSearch()); q.Chosen.CtxPerSlot <= 8192 || q.Chosen.CtxPerSlot >= l.CtxTrain {
		t.Errorf("llama-3.2-1b: %d cells per slot, want between 8192 and its trained %d", q.Chosen.CtxPerSlot, l.CtxTrain)
	}
	// A user's -cram is kept and checked.
	o = DefaultSearch()
	n := 100
	o.Fixed.CacheRAM = &n
	if q, _ := Search(m, s, o); q.Chosen == nil || q.Chosen.Profile.Serving.CacheRAM != 100 {
		t.Errorf("-cram 100 not kept: %+v", q.Chosen)
	}
}

// Checkpoints, unless given, take what the context leaves, above the
// three a next turn resumes from, up to llama-server's 32: Gemma 4 31B
// on 32 GB keeps a few of its 425 MiB sliding-window checkpoints per
// slot; a -ctxcp the user gives is kept.
func TestPlanSizesCheckpoints(t *testing.T) {
	m := model(t, "gemma-4-31b", synth.Q4_K_M)
	s, err := hw.LoadMachine("cpu-32")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Search(m, s, DefaultSearch())
	if err != nil || p.Chosen == nil {
		t.Fatalf("%v %+v", err, p)
	}
	sv, _ := p.Chosen.Profile.ServingOf()
	if sv.Checkpoints < minCheckpoints || sv.Checkpoints >= 32 || !slices.Contains(p.Chosen.Flags, "-ctxcp") {
		t.Errorf("-ctxcp %d (flags %v): want fewer than 32, at least %d", sv.Checkpoints, p.Chosen.Flags, minCheckpoints)
	}
	// One more does not fit: the most that fit.
	q := p.Chosen.Profile
	more := sv
	more.Checkpoints++
	q.Serving = &more
	if a, _ := Assess(m, nil, q, s); a.Verdict == Fits && a.LeastMargin() >= DefaultSearch().FitTarget {
		t.Errorf("-ctxcp %d fits too", more.Checkpoints)
	}
	o := DefaultSearch()
	two := 2
	o.Fixed.Checkpoints = &two
	if p, _ := Search(m, s, o); p.Chosen == nil || p.Chosen.Profile.Serving.Checkpoints != 2 {
		t.Errorf("-ctxcp 2 not kept: %+v", p.Chosen)
	}
}
