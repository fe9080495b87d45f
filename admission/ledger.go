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
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

// Ledger books the memory of admitted loads per physical domain. The zero
// value is ready to use; a Ledger must not be copied after first use.
type Ledger struct {
	mu      sync.Mutex
	seq     int
	tickets map[string]*Ticket
}

// Ticket is one admitted load's booking. Release it when the load fails or
// the model is unloaded.
type Ticket struct {
	ID    string
	Model string
	// Need is what the load requires in each domain, in bytes.
	Need map[string]int64
	// Assessment is the judgement that admitted it.
	Assessment *plan.Assessment

	l       *Ledger
	started bool // the load finished: its memory is in use now
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
// it when it fits. The judgement and the booking happen under one lock, so
// concurrent Admits see each other.
func (l *Ledger) Admit(model string, r *plan.Result, fresh *hw.Snapshot) (*Ticket, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	starting, all := map[string]int64{}, map[string]int64{}
	var holding []string
	for _, t := range l.sorted() {
		holding = append(holding, t.ID+" "+t.Model)
		for d, n := range t.Need {
			all[d] += n
			if !t.started {
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
	if l.tickets == nil {
		l.tickets = map[string]*Ticket{}
	}
	l.seq++
	t := &Ticket{ID: "m" + strconv.Itoa(l.seq), Model: model, Need: need, Assessment: a, l: l}
	l.tickets[t.ID] = t
	return t, nil
}

// Started records that the load finished, so a fresh snapshot now shows
// its memory as used.
func (t *Ticket) Started() {
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	t.started = true
}

// Release gives the booking back. Releasing twice is harmless.
func (t *Ticket) Release() {
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	delete(t.l.tickets, t.ID)
}

// Held returns the bookings in admission order.
func (l *Ledger) Held() []Ticket {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Ticket
	for _, t := range l.sorted() {
		c := *t
		c.l = nil
		out = append(out, c)
	}
	return out
}

func (l *Ledger) sorted() []*Ticket {
	out := make([]*Ticket, 0, len(l.tickets))
	for _, t := range l.tickets {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		a, _ := strconv.Atoi(out[i].ID[1:])
		b, _ := strconv.Atoi(out[j].ID[1:])
		return a < b
	})
	return out
}
