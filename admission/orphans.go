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
// llama-server it started still runs. Where start times are known the
// server must be proved to be the one headroom started (see server); a
// booking naming any other process is stale. Without start times a live
// id keeps the booking, so memory is not over-committed, but Reap never
// signals it.
func (b Booking) orphan() bool {
	if b.ChildPID <= 0 || runs(b.PID, b.PIDStart) {
		return false
	}
	if !startTimes {
		return processAlive(b.ChildPID)
	}
	ok, _ := b.server()
	return ok
}

// server reports whether the booking's llama-server runs and is provably
// the process headroom started: the same id and start time, leading a
// process group of its own (engine.Start makes every llama-server the
// leader of a new group), and the booking names that group or none. A
// booking naming a process that leads no group, or a group other than the
// one its process leads, was not written by Attach: signalling its group
// would hit processes headroom never started. why says what failed.
func (b Booking) server() (ok bool, why string) {
	switch {
	case b.ChildPID <= 0:
		return false, "it names no llama-server"
	case !processAlive(b.ChildPID):
		return false, fmt.Sprintf("llama-server %d has exited", b.ChildPID)
	case b.ChildStart == 0:
		return false, fmt.Sprintf("it gives no start time for process %d, so nothing proves that process is the llama-server it started", b.ChildPID)
	}
	if now := startTime(b.ChildPID); now != b.ChildStart {
		return false, fmt.Sprintf("process %d started at tick %d, the booking says %d: another process has its id", b.ChildPID, now, b.ChildStart)
	}
	if b.ChildPGID != 0 && b.ChildPGID != b.ChildPID {
		return false, fmt.Sprintf("it names process group %d, but the llama-server headroom starts leads its own group, %d", b.ChildPGID, b.ChildPID)
	}
	if g := processGroup(b.ChildPID); g != b.ChildPID {
		return false, fmt.Sprintf("process %d is in process group %d instead of leading its own, as every llama-server headroom starts does", b.ChildPID, g)
	}
	return true, ""
}

// Reaped is what Reap did.
type Reaped struct {
	// Stopped are the bookings whose llama-server it stopped.
	Stopped []Booking
	// Dropped are bookings removed without any signal: a process runs
	// under the llama-server id they name, but nothing proves it is the
	// server headroom started.
	Dropped []Dropped
}

// Dropped is a stale booking and why it was not trusted.
type Dropped struct {
	Booking Booking
	Why     string
}

// Reap stops the llama-servers whose headroom is gone (killed before it
// could stop them): nobody can unload them any more, yet they hold the
// memory their bookings name. Only a process proved to be the booked
// server (see Booking.server: its start time, and a process group of its
// own that the booking names) is signalled, so neither a reused id nor a
// forged group is ever hit; bookings that fail the proof are dropped and
// listed in Reaped.Dropped. Where start times are unknown an orphan is
// left running and its booking kept. Each is sent SIGTERM, then SIGKILL
// after grace, both to the group it leads; Reap returns the bookings it
// ended, whose memory the next admission no longer counts. The ledger's
// lock is not held while it waits.
func (l *Ledger) Reap(ctx context.Context, grace time.Duration) (Reaped, error) {
	var out Reaped
	if l.Path == "" || !startTimes {
		return out, nil // in memory, every booking is this process's own
	}
	var orphans []Booking
	if err := l.updateSeeing(func(bs, dropped []Booking) ([]Booking, error) {
		for _, b := range bs {
			if b.orphan() {
				orphans = append(orphans, b)
			}
		}
		for _, b := range dropped {
			if b.ChildPID > 0 && processAlive(b.ChildPID) && !runs(b.PID, b.PIDStart) {
				_, why := b.server()
				out.Dropped = append(out.Dropped, Dropped{Booking: b, Why: why})
			}
		}
		return bs, nil
	}); err != nil {
		return out, err
	}
	var errs []error
	for _, b := range orphans {
		if err := stopOrphan(ctx, b, grace); err != nil {
			errs = append(errs, err)
			continue
		}
		out.Stopped = append(out.Stopped, b)
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("admission: reaping llama-servers left by a killed headroom: %v", errs)
	}
	return out, nil
}

func stopOrphan(ctx context.Context, b Booking, grace time.Duration) error {
	gone := func() bool { return !runs(b.ChildPID, b.ChildStart) }
	for _, kill := range []bool{false, true} {
		if gone() {
			return nil
		}
		// Proved again before every signal: the process may have exited
		// and its id been given to another since the last look.
		if ok, why := b.server(); !ok {
			if gone() {
				return nil
			}
			return fmt.Errorf("llama-server %d of booking %s: not signalled: %s", b.ChildPID, b.ID, why)
		}
		if err := signalLeader(b.ChildPID, kill); err != nil {
			return fmt.Errorf("llama-server %d of booking %s: signalling its process group (kill %v): %w", b.ChildPID, b.ID, kill, err)
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
