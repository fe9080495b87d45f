// Package admission decides, at load time, whether a model may start beside
// the models headroom already runs: a fresh snapshot, the load's accounting
// judged against it with every earlier admission's memory held back, and a
// ledger that makes the check and the booking one step, so two loads that
// each fit alone but not together are never both admitted.
//
// The accounting a preview computed is reused for the load when nothing it
// depends on changed; Key names those inputs.
package admission

import (
	"crypto/rand"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

// Ledger books the memory of admitted loads per physical domain. The zero
// value keeps the bookings of one process; with Path set they are kept in
// a file that every headroom process on the machine shares, so 'headroom
// serve' in two terminals sees the other's model. Bookings of processes
// that have exited are dropped when the file is read. A Ledger must not be
// copied after first use.
type Ledger struct {
	// Path is the shared bookings file; "" keeps them in memory.
	Path string

	// stage, when set, is called at each stage of a rewrite of the file
	// (tests stop the process there).
	stage func(string)

	mu       sync.Mutex
	seq      int
	bookings []Booking // in memory, when Path is ""
}

// Booking is one admitted load as the ledger keeps it. It is held while
// the headroom that made it or the llama-server it started runs: a
// llama-server left by a headroom that was killed still holds its memory.
// Each process is named by its id and its start time (zero where the
// system does not say), since an id is reused once its process is gone.
type Booking struct {
	ID       string `json:"id"`
	PID      int    `json:"pid"`
	PIDStart uint64 `json:"pid_start,omitempty"`
	// ChildPID, ChildStart and ChildPGID are the llama-server the load
	// started and its process group, once Attach recorded them.
	ChildPID   int    `json:"child_pid,omitempty"`
	ChildStart uint64 `json:"child_start,omitempty"`
	ChildPGID  int    `json:"child_pgid,omitempty"`
	Model      string `json:"model"`
	// Need is what the load requires in each domain, in bytes.
	Need map[string]int64 `json:"need"`
	// Started says the load finished: a fresh snapshot shows its memory
	// as used.
	Started  bool      `json:"started"`
	Admitted time.Time `json:"admitted"`
}

// Ticket is an admitted load's booking. Release it when the load fails or
// the model is unloaded.
type Ticket struct {
	Booking
	// Assessment is the judgement that admitted it.
	Assessment *plan.Assessment

	l *Ledger
}

// Refusal is a load the ledger did not admit, with the judgement that
// refused it.
type Refusal struct {
	Model      string
	Assessment *plan.Assessment
	// Holding lists the loads whose memory counted against it.
	Holding []string
}

func (r *Refusal) Error() string {
	s := fmt.Sprintf("%s not admitted: %s", r.Model, r.Assessment.Reason)
	if len(r.Holding) > 0 {
		s += fmt.Sprintf(" (beside %d model(s) headroom runs: %v)", len(r.Holding), r.Holding)
	}
	return s
}

// Admit judges an accounting against a fresh snapshot with the memory of
// every load already admitted held back (see hw.Snapshot.Holding), and books
// it when it fits. The judgement and the booking happen under one lock (a
// file lock too, with Path), so concurrent Admits see each other.
func (l *Ledger) Admit(model string, r *plan.Result, fresh *hw.Snapshot) (*Ticket, error) {
	var t *Ticket
	err := l.update(func(bs []Booking) ([]Booking, error) {
		starting, all := map[string]int64{}, map[string]int64{}
		var holding []string
		for _, b := range bs {
			holding = append(holding, b.ID+" "+b.Model)
			for d, n := range b.Need {
				all[d] += n
				if !b.Started {
					starting[d] += n
				}
			}
		}
		a, err := r.Against(fresh.Holding(starting, all))
		if err != nil {
			return nil, err
		}
		if a.Verdict != plan.Fits {
			return nil, &Refusal{Model: model, Assessment: a, Holding: holding}
		}
		need := map[string]int64{}
		for _, d := range a.Domains {
			if d.Required > 0 {
				need[d.ID] = d.Required
			}
		}
		l.seq++
		// Two Ledgers of one process may share a file: the random part
		// keeps their ids apart.
		b := Booking{ID: fmt.Sprintf("%d.%d.%s", os.Getpid(), l.seq, rand.Text()[:6]), PID: os.Getpid(), PIDStart: startTime(os.Getpid()),
			Model: model, Need: need, Admitted: time.Now().UTC()}
		t = &Ticket{Booking: b, Assessment: a, l: l}
		return append(bs, b), nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Started records that the load finished, so a fresh snapshot now shows
// its memory as used.
func (t *Ticket) Started() error {
	return t.l.update(func(bs []Booking) ([]Booking, error) {
		for i := range bs {
			if bs[i].ID == t.ID {
				bs[i].Started = true
			}
		}
		return bs, nil
	})
}

// Attach records the llama-server started for this booking and its
// process group (0 where there are none), so that the booking outlives a
// headroom killed before it could stop the server.
func (t *Ticket) Attach(pid, pgid int) error {
	if pid <= 0 || pgid < 0 {
		return fmt.Errorf("admission: attaching process %d (group %d) to booking %s: expected a positive id", pid, pgid, t.ID)
	}
	start := startTime(pid)
	return t.l.update(func(bs []Booking) ([]Booking, error) {
		for i := range bs {
			if bs[i].ID == t.ID {
				bs[i].ChildPID, bs[i].ChildStart, bs[i].ChildPGID = pid, start, pgid
			}
		}
		return bs, nil
	})
}

// Release gives the booking back. Releasing twice is harmless.
func (t *Ticket) Release() error {
	return t.l.update(func(bs []Booking) ([]Booking, error) {
		return slices.DeleteFunc(bs, func(b Booking) bool { return b.ID == t.ID }), nil
	})
}

// Held returns the bookings in admission order.
func (l *Ledger) Held() ([]Booking, error) {
	var out []Booking
	err := l.update(func(bs []Booking) ([]Booking, error) {
		out = append(out, bs...)
		return bs, nil
	})
	return out, err
}

// update runs f on the bookings under the ledger's lock and keeps what it
// returns; an error from f changes nothing.
func (l *Ledger) update(f func([]Booking) ([]Booking, error)) error {
	return l.updateSeeing(func(live, _ []Booking) ([]Booking, error) { return f(live) })
}

// updateSeeing is update with the bookings dropped as stale shown to f
// too (always none in memory).
func (l *Ledger) updateSeeing(f func(live, dropped []Booking) ([]Booking, error)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Path == "" {
		bs, err := f(slices.Clone(l.bookings), nil)
		if err != nil {
			return err
		}
		l.bookings = bs
		return nil
	}
	stage := l.stage
	if stage == nil {
		stage = func(string) {}
	}
	return updateFile(l.Path, stage, f)
}
