package plan

import (
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/synth"
)

// Under --mlock the CPU's mapping is resident from the file's start to
// the end of its span, the repacked weights' pages between included, and
// that is what is locked; loaded, the CPU buffer is locked and the
// repacked one is not. The flags say it in the build's words.
func TestMlock(t *testing.T) {
	m := model(t, "qwen3-8b", synth.Q4_K_M)
	s, err := hw.LoadMachine("cpu-32")
	if err != nil {
		t.Fatal(err)
	}
	assess := func(mmap, mlock bool) (*Assessment, Profile) {
		t.Helper()
		p := Defaults()
		p.Ctx, p.Parallel, p.Mmap, p.Mlock = 8192, 1, mmap, mlock
		a, err := Assess(m, nil, p, s)
		if err != nil {
			t.Fatal(err)
		}
		return a, p
	}
	mapped := func(a *Assessment) Buffer {
		for _, b := range a.Buffers {
			if b.BufferType == mappedCPU {
				return b
			}
		}
		t.Fatal("no CPU_Mapped buffer")
		return Buffer{}
	}
	ram := func(a *Assessment) int64 { return a.Domains[0].Required }

	plain, p0 := assess(true, false)
	locked, p1 := assess(true, true)
	b0, b1 := mapped(plain), mapped(locked)
	if b0.Resident == 0 || b0.Resident >= b0.Bytes {
		t.Fatalf("without --mlock the repacked pages should be reclaimable: resident %d of %d", b0.Resident, b0.Bytes)
	}
	if b1.Bytes != b0.Bytes || b1.Resident < b1.Bytes {
		t.Errorf("--mlock: span %d resident %d, want the span %d resident whole and more (from the file's start)", b1.Bytes, b1.Resident, b0.Bytes)
	}
	if got, want := ram(locked)-ram(plain), b1.Resident-b0.Resident; got != want || got <= 0 {
		t.Errorf("--mlock charged ram %d more, want %d (the pages no longer reclaimable)", got, want)
	}
	if got := LockedBytes(locked.Buffers, p1); got != b1.Resident {
		t.Errorf("locked %d, want the mapping to the span's end, %d", got, b1.Resident)
	}
	if got := LockedBytes(plain.Buffers, p0); got != 0 {
		t.Errorf("locked %d without --mlock", got)
	}

	loaded, p2 := assess(false, true)
	var cpu, repack int64
	for _, b := range loaded.Buffers {
		switch {
		case b.Kind == KindModel && b.BufferType == "CPU":
			cpu += b.Bytes
		case b.Kind == KindModel && b.BufferType == "CPU_REPACK":
			repack += b.Bytes
		}
	}
	if cpu == 0 || repack == 0 {
		t.Fatalf("loaded: CPU %d, CPU_REPACK %d; want both (cpu-32 repacks Q4_K)", cpu, repack)
	}
	if got := LockedBytes(loaded.Buffers, p2); got != cpu {
		t.Errorf("loaded, locked %d, want the CPU buffer's %d and not CPU_REPACK's %d", got, cpu, repack)
	}

	for _, tc := range []struct {
		loads, mmap bool
		want        string
	}{
		{true, true, "--load-mode mmap+mlock"},
		{true, false, "--load-mode mlock"},
		{false, true, "--mlock"},
		{false, false, "--no-mmap --mlock"},
	} {
		r := builds.For(10000)
		r.MlockLoads = tc.loads
		p := p1
		p.Rules, p.Mmap = &r, tc.mmap
		args := strings.Join(p.Args(), " ")
		if !strings.Contains(args, tc.want) || strings.Count(args, "mlock") != 1 {
			t.Errorf("--mlock loads %v, mmap %v: %s, want %s", tc.loads, tc.mmap, args, tc.want)
		}
	}
}
