package admission

import (
	"context"
	"fmt"
	"time"
)

// runs reports whether the process named by id and start time still runs:
// the id is alive and, where the start time is known, it is the same
// process and not a later one given the same id.
func runs(pid int, start uint64) bool {
	if !processAlive(pid) {
		return false
	}
	if start == 0 {
		return true
	}
	now := startTime(pid)
	return now == 0 || now == start
}

// alive reports whether the booking still holds memory: its headroom runs,
// or the llama-server it started does.
func (b Booking) alive() bool {
	return runs(b.PID, b.PIDStart) || b.orphan()
}

// orphan reports whether the booking's headroom is gone while the
// llama-server it started still runs.
func (b Booking) orphan() bool {
	return b.ChildPID > 0 && !runs(b.PID, b.PIDStart) && runs(b.ChildPID, b.ChildStart)
}

// Reap stops the llama-servers whose headroom is gone (killed before it
// could stop them): nobody can unload them any more, yet they hold the
// memory their bookings name. Only a process whose start time matches its
// booking is signalled, so a reused id is never hit; where start times are
// unknown an orphan is left running and its booking kept. Each is sent
// SIGTERM, then SIGKILL after grace; Reap returns the bookings it ended,
// whose memory the next admission no longer counts. The ledger's lock is
// not held while it waits.
func (l *Ledger) Reap(ctx context.Context, grace time.Duration) ([]Booking, error) {
	if l.Path == "" {
		return nil, nil // in memory, every booking is this process's own
	}
	var orphans []Booking
	if err := l.update(func(bs []Booking) ([]Booking, error) {
		for _, b := range bs {
			if b.orphan() && b.ChildStart != 0 {
				orphans = append(orphans, b)
			}
		}
		return bs, nil
	}); err != nil {
		return nil, err
	}
	var errs []error
	var reaped []Booking
	for _, b := range orphans {
		if err := stopOrphan(ctx, b, grace); err != nil {
			errs = append(errs, err)
			continue
		}
		reaped = append(reaped, b)
	}
	if len(errs) > 0 {
		return reaped, fmt.Errorf("admission: reaping llama-servers left by a killed headroom: %v", errs)
	}
	return reaped, nil
}

func stopOrphan(ctx context.Context, b Booking, grace time.Duration) error {
	gone := func() bool { return !runs(b.ChildPID, b.ChildStart) }
	for _, kill := range []bool{false, true} {
		if gone() {
			return nil
		}
		if err := signalGroup(b.ChildPID, b.ChildPGID, kill); err != nil {
			return fmt.Errorf("llama-server %d of booking %s: signalling it (kill %v): %w", b.ChildPID, b.ID, kill, err)
		}
		wait := grace
		if kill {
			wait = 5 * time.Second
		}
		deadline := time.NewTimer(wait)
		tick := time.NewTicker(20 * time.Millisecond)
	poll:
		for !gone() {
			select {
			case <-ctx.Done():
				deadline.Stop()
				tick.Stop()
				return fmt.Errorf("llama-server %d of booking %s: %w", b.ChildPID, b.ID, ctx.Err())
			case <-deadline.C:
				break poll
			case <-tick.C:
			}
		}
		deadline.Stop()
		tick.Stop()
	}
	if !gone() {
		return fmt.Errorf("llama-server %d of booking %s: still running after SIGKILL", b.ChildPID, b.ID)
	}
	return nil
}
