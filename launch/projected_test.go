package launch

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/engine/enginetest"
	"github.com/headroom-llm/headroom/plan"
)

// What llama.cpp's own projection counts beyond the plan is charged:
// before the download, a plan it no longer lets fit is refused, saying
// why; at the load, the booking holds it.
func TestAdmitProjected(t *testing.T) {
	bin := enginetest.BuildFake(t)
	f, a, path := cpuMamba(t)
	cpu, _ := plan.Devices(a.Snapshot)
	huge := &Projected{By: "llama-fit-params", Rows: []engine.Row{{BufferType: cpu.Name, Kind: "model", DiffBytes: 1 << 40}}}
	err := a.AdmitProjected(huge)
	var nf *NotFit
	if !errors.As(err, &nf) || nf.Verdict != plan.DoesNotFit || !strings.Contains(err.Error(), "llama.cpp's own projection (llama-fit-params) counts more than headroom's plan (CPU model +1048576 MiB)") {
		t.Fatalf("a projection beyond the machine: %v", err)
	}
	small := &Projected{By: "llama-fit-params", Rows: []engine.Row{{BufferType: cpu.Name, Kind: "kv", DiffBytes: 3 << 20}}}
	if err := a.AdmitProjected(small); err != nil {
		t.Fatalf("a projection 3 MiB over a fitting plan: %v", err)
	}
	if err := a.AdmitProjected(nil); err != nil {
		t.Fatal(err)
	}
	need := func(p *Projected) int64 {
		t.Helper()
		var ledger admission.Ledger
		run, err := f.deps.Load(context.Background(), a, path, LoadOptions{Bin: bin, Ledger: &ledger, ReadyTimeout: 20 * time.Second, Projected: p,
			Env: []string{"FAKE_LLAMA_MODE=good", "FAKE_LLAMA_LOG=" + goldenLog(t, "mamba2-130m.Q8_0.cpu.c4096x1.nofa.b512")}})
		if err != nil {
			t.Fatalf("load: %v\nsaid:\n%s", err, f.said)
		}
		defer run.Stop(context.Background())
		// The charge is for admission: the engine's logged buffers are
		// held to the plan's own, which the golden log matches, so the
		// check passes with and without it.
		if rec := run.Reconciliation; !rec.OK() {
			t.Errorf("with projection %v the check fails: %s", p != nil, rec.Summary())
		}
		var sum int64
		for _, n := range run.Ticket.Booking.Need {
			sum += n
		}
		return sum
	}
	plain, charged := need(nil), need(small)
	if charged-plain != 3<<20 {
		t.Errorf("the booking grew by %d bytes with a 3 MiB projection, want %d", charged-plain, 3<<20)
	}
	if !strings.Contains(f.said.String(), "admitting with llama.cpp's own projection where it counts more than the plan (CPU kv +3 MiB)") {
		t.Errorf("the load did not say it charged the projection:\n%s", f.said)
	}
}
