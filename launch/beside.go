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
// not fit beside the bookings kept says which they are.
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
	beside, kept := BesideBookings(snap, held, o.Reclaim)
	a, err := d.assessOn(ctx, m, o.Search, beside)
	var nf *NotFit
	if errors.As(err, &nf) && len(kept) > 0 {
		nf.Why = append(nf.Why, "planned beside the models that may not be stopped now: "+keptSays(kept))
	}
	return a, err
}

// BesideBookings is the snapshot a load is planned on when the bookings
// reclaim reports true for may be stopped to make room: their memory
// counts as free, and every other booking's is held back, as the ledger's
// admission holds it (hw.Snapshot.Holding). It returns the bookings kept.
//
// A probe's free memory already lacks what a started booking's server
// holds, so a reclaimable started booking adds its need back to the free
// figure; one not started yet holds nothing a probe sees, and is simply
// not held back. The free figure never exceeds the domain's size less
// what the kept bookings hold.
func BesideBookings(s *hw.Snapshot, held []admission.Booking, reclaim func(admission.Booking) bool) (*hw.Snapshot, []admission.Booking) {
	// Holding takes free as min(free - starting, size - all): a negative
	// starting figure raises the free one by what the reclaimable
	// bookings' servers hold now.
	starting, all := map[string]int64{}, map[string]int64{}
	var kept []admission.Booking
	for _, b := range held {
		if reclaim(b) {
			if b.Started {
				for d, n := range b.Need {
					starting[d] -= n
				}
			}
			continue
		}
		kept = append(kept, b)
		for d, n := range b.Need {
			all[d] += n
			if !b.Started {
				starting[d] += n
			}
		}
	}
	return s.Holding(starting, all), kept
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
