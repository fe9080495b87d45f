package launch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/engine/enginetest"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

// A load the ledger refuses asks Evict for room: when Evict stops the
// model in the way the load is admitted, and when it says nothing can be
// stopped its answer is the load's, with no server started.
func TestLoadAsksEvictForRoom(t *testing.T) {
	bin := enginetest.BuildFake(t)
	m := sparse8B(t)
	snap, _ := hw.LoadMachine("rtx-4090")
	d := &Deps{Machine: func(context.Context) (*hw.Snapshot, error) { return snap, nil }, Cache: &admission.Cache{}}
	o := plan.DefaultSearch()
	o.Parallel, o.Fixed.Ctx = 1, 8192
	all := 999
	o.Fixed.GPULayers = &all
	a, err := d.Assess(context.Background(), m, o)
	if err != nil {
		t.Fatal(err)
	}
	path := m.Header.Artifact.Files[0].Path
	var ledger admission.Ledger
	lo := LoadOptions{Bin: bin, Ledger: &ledger, ReadyTimeout: 20 * time.Second, Env: []string{"FAKE_LLAMA_MODE=good"}}
	first, err := d.Load(context.Background(), a, path, lo)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Stop(context.Background())

	// Evict that cannot help: its error is the load's.
	noRoom := errors.New("nothing idle to stop")
	var asked *admission.Refusal
	lo.Evict = func(ctx context.Context, r *admission.Refusal) error { asked = r; return noRoom }
	if _, err := d.Load(context.Background(), a, path, lo); !errors.Is(err, noRoom) {
		t.Fatalf("with nothing to stop: %v, want Evict's error", err)
	}
	if asked == nil || asked.Assessment == nil || asked.Assessment.Verdict == plan.Fits {
		t.Fatalf("Evict was asked with %+v, want the refusal", asked)
	}
	if held, _ := ledger.Held(); len(held) != 1 {
		t.Errorf("ledger holds %d loads after the refused one, want 1", len(held))
	}

	// Evict that stops the first server: the load is admitted.
	calls := 0
	lo.Evict = func(ctx context.Context, r *admission.Refusal) error { calls++; return first.Stop(ctx) }
	second, err := d.Load(context.Background(), a, path, lo)
	if err != nil {
		t.Fatalf("after Evict stopped the first: %v", err)
	}
	defer second.Stop(context.Background())
	if calls != 1 {
		t.Errorf("Evict asked %d times, want once", calls)
	}
	if held, _ := ledger.Held(); len(held) != 1 || held[0].ID != second.Ticket.ID {
		t.Errorf("ledger holds %+v, want the second load alone", held)
	}
}
