package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/headroom-llm/headroom/internal/term"
)

// shortSays says by how much each domain is short, for an eviction's reason.
func shortSays(short map[string]int64) string {
	var s string
	for i, d := range sortedKeys(short) {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s short by %d MiB", d, short[d]>>20)
	}
	return s
}

// drainTimeout is how long a stop waits for a model's requests in flight
// to be answered before it stops the server under them.
func (p *Pool) drainTimeout() time.Duration {
	if p.cfg.Drain > 0 {
		return p.cfg.Drain
	}
	return DefaultDrain
}

// drain waits, p.mu held, until e has no request in flight, the pool is
// closing, or drainTimeout has passed, and returns how many are left: a
// client that stops reading a stream holds a request in flight for as
// long as it likes, and an eviction (which holds the load lock) or a
// shutdown must not wait on it for good.
func (p *Pool) drain(e *entry) int {
	d := p.drainFor(e)
	deadline := time.Now().Add(d)
	wake := time.AfterFunc(d, p.cond.Broadcast)
	defer wake.Stop()
	for e.inFlight > 0 && !p.closed && time.Now().Before(deadline) {
		p.cond.Wait()
	}
	return e.inFlight
}

// stop waits for e's requests in flight to finish (drain), stops its
// server and marks it unloaded. e.state is StateStopping already, so no new request
// starts on it.
func (p *Pool) stop(ctx context.Context, e *entry, kind, reason string) error {
	p.mu.Lock()
	if left := p.drain(e); left > 0 {
		reason += fmt.Sprintf("; %d request(s) still in flight after %s were cut", left, p.drainFor(e))
	}
	c := e.child
	p.mu.Unlock()
	var err error
	var need map[string]int64
	if c != nil {
		need = c.Booking().Need
		err = c.Stop(ctx)
	}
	p.mu.Lock()
	if e.child == c {
		e.child = nil
		e.set(StateUnloaded)
	}
	p.stats.count(&p.stats.stops, kind)
	p.event(kind, e.Name, need, reason)
	p.mu.Unlock()
	p.cond.Broadcast()
	return err
}

// watch notices a server that exits without being asked (killed, crashed)
// and gives its booking back, so the next request loads it again.
func (p *Pool) watch(e *entry, c Child) {
	defer p.wg.Done()
	select {
	case <-c.Exited():
	case <-p.base.Done():
		return
	}
	p.mu.Lock()
	mine := e.child == c && e.state == StateLoaded
	if mine {
		e.set(StateStopping)
	}
	p.mu.Unlock()
	if !mine {
		return // stopped on purpose
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Requests in flight on it fail on their own; stop releases the
	// booking once they have.
	p.stop(ctx, e, "exit", "its llama-server exited without being asked; the booking is released and the next request loads it again")
}

// janitor stops models idle past their time-out.
func (p *Pool) janitor() {
	defer p.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-p.base.Done():
			return
		case <-tick.C:
		}
		p.mu.Lock()
		var idle []*entry
		for _, e := range p.entries {
			if e.state == StateLoaded && !e.Pinned && e.Idle > 0 && e.inFlight == 0 && time.Since(e.lastUsed) > e.Idle {
				e.set(StateStopping)
				idle = append(idle, e)
			}
		}
		p.mu.Unlock()
		for _, e := range idle {
			ctx, cancel := context.WithTimeout(p.base, 30*time.Second)
			p.stop(ctx, e, "idle", fmt.Sprintf("no request for %s", e.Idle))
			cancel()
		}
	}
}

// event records one load, eviction, refusal or exit and logs it; p.mu is
// held.
func (p *Pool) event(kind, model string, mem map[string]int64, reason string) {
	ev := Event{Time: time.Now().UTC(), Kind: kind, Model: model, Memory: maps.Clone(mem), Reason: reason}
	p.events = append(p.events, ev)
	if len(p.events) > maxEvents {
		p.events = slices.Delete(p.events, 0, len(p.events)-maxEvents)
	}
	if p.cfg.Log != nil {
		// A name is the request's: a line break in it would forge a
		// line of the log. It is escaped, and so is the reason, which
		// may quote it.
		line := fmt.Sprintf("%s %s: %s", kind, term.Text(model), term.Text(reason))
		if len(mem) > 0 {
			line += " [" + memSays(mem) + "]"
		}
		p.cfg.Log(line)
	}
}

func memSays(mem map[string]int64) string {
	var s string
	for i, d := range sortedKeys(mem) {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %d MiB", d, mem[d]>>20)
	}
	return s
}

// Close stops every model the pool loaded and waits for loads in progress
// to end.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	// Stops waiting for requests in flight (drain) give up now.
	p.cond.Broadcast()
	var live []*entry
	for _, e := range p.entries {
		if e.child != nil && e.state != StateStopping {
			e.set(StateStopping)
			live = append(live, e)
		}
	}
	p.mu.Unlock()
	p.cancel() // loads in progress stop their servers
	var wg sync.WaitGroup
	errs := make([]error, len(live))
	for i, e := range live {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.stopNow(ctx, e)
		}()
	}
	wg.Wait()
	p.wg.Wait()
	return errors.Join(errs...)
}

// stopNow stops e without waiting for its requests: the server is going
// away, and its clients get an error.
func (p *Pool) stopNow(ctx context.Context, e *entry) error {
	p.mu.Lock()
	c := e.child
	p.mu.Unlock()
	err := c.Stop(ctx)
	p.mu.Lock()
	e.child = nil
	e.set(StateUnloaded)
	p.stats.count(&p.stats.stops, "stop")
	p.event("stop", e.Name, c.Booking().Need, "the server shut down")
	p.mu.Unlock()
	return err
}
