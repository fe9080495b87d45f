package launch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/units"
)

// assessBeside is Assess on the snapshot o.Reclaim asks for (see
// Options.Reclaim), or on the bare snapshot without it. A model that does
// not fit on a probe beside the models that stay says which they are.
func (d *Deps) assessBeside(ctx context.Context, m *Model, o Options) (*Assessed, error) {
	if o.Reclaim == nil {
		return d.Assess(ctx, m, o.Search)
	}
	d.say("assessing", "taking a hardware snapshot")
	snap, err := d.Machine(ctx)
	if err != nil {
		return nil, err
	}
	ledger := o.Load.Ledger
	if ledger == nil {
		ledger = &admission.Ledger{}
	}
	held, err := ledger.Held()
	if err != nil {
		return nil, err
	}
	beside, kept := Reclaiming(snap, held, o.Reclaim)
	a, err := d.assessOn(ctx, m, o.Search, beside)
	var nf *NotFit
	if errors.As(err, &nf) && len(kept) > 0 {
		nf.Why = append(nf.Why, "the probe's free memory lacks what the models that stay hold: "+keptSays(kept))
	}
	return a, err
}

// Reclaiming is the snapshot a load is planned on when the bookings
// reclaim reports true for may be stopped to make room: a probe's free
// memory lacks what their servers hold, so each started one's need is
// added back, up to the domain's size. It returns the started bookings
// that stay and hold memory in a domain the probe observed, whose memory
// the free figures still lack.
//
// The other bookings are not held back here: admission does that, beside
// every booking, without the search's --fit-target. Holding them back in
// the plan too would leave --fit-target free beyond the models that stay,
// and refuse a model the ledger admits beside them.
func Reclaiming(s *hw.Snapshot, held []admission.Booking, reclaim func(admission.Booking) bool) (*hw.Snapshot, []admission.Booking) {
	observed := map[string]bool{}
	for _, d := range s.Domains {
		observed[d.ID] = d.Free != nil
	}
	// Holding takes free as min(free - starting, size - all): a negative
	// starting figure raises the free one by what the reclaimable
	// bookings' servers hold now; a preset's unobserved free memory is
	// its size already and stays so.
	back := map[string]int64{}
	var kept []admission.Booking
	for _, b := range held {
		switch {
		case !b.Started:
		case reclaim(b):
			for d, n := range b.Need {
				back[d] -= n
			}
		default:
			for d, n := range b.Need {
				if n > 0 && observed[d] {
					kept = append(kept, b)
					break
				}
			}
		}
	}
	return s.Holding(back, nil), kept
}

// keptSays names kept bookings and what each holds.
func keptSays(kept []admission.Booking) string {
	var out []string
	for _, b := range kept {
		var mem []string
		for _, d := range slices.Sorted(maps.Keys(b.Need)) {
			mem = append(mem, d+" "+units.Size(b.Need[d]))
		}
		out = append(out, fmt.Sprintf("%s (%s)", b.Model, strings.Join(mem, ", ")))
	}
	return strings.Join(out, "; ")
}
