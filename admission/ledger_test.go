package admission

import (
	"errors"
	"sync"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/synth"
)

// accounting returns the accounting of a Llama-3.1-8B file at 8192 cells
// with every layer on the GPU of a preset machine.
func accounting(t *testing.T, q synth.Quant, machine string) (*plan.Result, *hw.Snapshot) {
	t.Helper()
	s, ok := synth.Lookup("llama-3.1-8b")
	if !ok {
		t.Fatal("no llama-3.1-8b shape")
	}
	g, err := catalog.DeriveModel(s, q)
	if err != nil {
		t.Fatal(err)
	}
	m, err := arch.FromGGUF(g)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := hw.LoadMachine(machine)
	if err != nil {
		t.Fatal(err)
	}
	p := plan.Defaults()
	p.Ctx = 8192
	p.GPULayers = 999
	cpu, gpus := plan.Devices(snap)
	r, err := plan.Account(m, p, cpu, gpus)
	if err != nil {
		t.Fatal(err)
	}
	return r, snap
}

// capacityFor says how many copies of an accounting fit a snapshot, from
// the per-domain figures of one admission alone: the independent answer
// the ledger must agree with.
func capacityFor(t *testing.T, r *plan.Result, snap *hw.Snapshot) int {
	t.Helper()
	a, err := r.Against(snap)
	if err != nil {
		t.Fatal(err)
	}
	n := -1
	for _, d := range a.Domains {
		if d.Required <= 0 {
			continue
		}
		if k := int(d.Available / d.Required); n < 0 || k < n {
			n = k
		}
	}
	return n
}

func TestLedgerRefusesWhatFitsOnlyAlone(t *testing.T) {
	r, snap := accounting(t, synth.F16, "rtx-4090") // about 16 GiB on a 24 GiB card
	if n := capacityFor(t, r, snap); n != 1 {
		t.Fatalf("test premise: want a model that fits once, fits %d times", n)
	}
	var l Ledger
	a, err := l.Admit("first", r, snap)
	if err != nil {
		t.Fatalf("first load refused: %v", err)
	}
	_, err = l.Admit("second", r, snap)
	var ref *Refusal
	if !errors.As(err, &ref) || ref.Assessment.Verdict != plan.DoesNotFit || len(ref.Holding) != 1 {
		t.Fatalf("second load: want a refusal naming the first, got %v", err)
	}
	t.Log(err)
	// Once the first is running, a fresh snapshot of a preset still knows
	// nothing of it: the booking alone must keep refusing.
	a.Started()
	if _, err := l.Admit("second", r, snap); !errors.As(err, &ref) {
		t.Fatalf("second load after the first started: want a refusal, got %v", err)
	}
	a.Release()
	b, err := l.Admit("second", r, snap)
	if err != nil {
		t.Fatalf("second load after the first was unloaded: %v", err)
	}
	if got, err := l.Held(); err != nil || len(got) != 1 || got[0].ID != b.ID {
		t.Errorf("held %+v, want only %s", got, b.ID)
	}
}

func TestLedgerConcurrentAdmissions(t *testing.T) {
	for _, c := range []struct {
		q       synth.Quant
		machine string
	}{
		{synth.F16, "rtx-4090"},
		{synth.Q4_K_M, "rtx-4090"},
		{synth.Q4_K_M, "m4-max-128"},
	} {
		t.Run(string(c.q)+"/"+c.machine, func(t *testing.T) {
			r, snap := accounting(t, c.q, c.machine)
			want := capacityFor(t, r, snap)
			if want < 1 {
				t.Fatalf("test premise: the model does not fit %s once", c.machine)
			}
			var (
				l        Ledger
				wg       sync.WaitGroup
				mu       sync.Mutex
				admitted int
				refused  int
			)
			for range 50 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := l.Admit("m", r, snap)
					mu.Lock()
					defer mu.Unlock()
					var ref *Refusal
					switch {
					case err == nil:
						admitted++
					case errors.As(err, &ref):
						refused++
					default:
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if admitted != want || refused != 50-want {
				t.Errorf("50 concurrent loads: %d admitted, %d refused; want %d admitted", admitted, refused, want)
			}
			t.Logf("%s on %s: %d of 50 admitted", c.q, c.machine, admitted)
		})
	}
}

func TestLedgerLiveSnapshot(t *testing.T) {
	// On a live machine a started load shows in the free figure; it must
	// not be counted twice, or a second model that fits would be refused.
	r, snap := accounting(t, synth.Q4_K_M, "rtx-4090")
	var l Ledger
	a, err := l.Admit("first", r, snap)
	if err != nil {
		t.Fatal(err)
	}
	a.Started()
	live := snap.Holding(nil, a.Need) // the free figures a probe now reads
	for i := range live.Domains {
		d := &live.Domains[i]
		if d.Free == nil {
			f := d.Available()
			d.Free = &f
		}
	}
	if _, err := l.Admit("second", r, live); err != nil {
		t.Errorf("a second 8B Q4_K_M on a 24 GiB card beside a started one: %v", err)
	}
}
