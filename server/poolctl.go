package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/report"
)

// ErrNotLoaded is an unload of a model that holds no server.
var ErrNotLoaded = errors.New("not loaded")

// find is the entry a name or one of its aliases names; nil for none.
// p.mu is held.
func (p *Pool) find(name string) *entry {
	if e := p.entries[name]; e != nil {
		return e
	}
	for _, e := range p.entries {
		if slices.Contains(e.Aliases, name) {
			return e
		}
	}
	return nil
}

// known is the entry of a model the pool serves, by name or alias, with
// the canonical name tried too; it creates none.
func (p *Pool) known(name string) (*entry, error) {
	if e := p.find(name); e != nil {
		return e, nil
	}
	if p.cfg.Canonical != nil {
		if e := p.find(p.cfg.Canonical(name)); e != nil {
			return e, nil
		}
	}
	return nil, fmt.Errorf("%q: %w; GET /v1/models lists the ones this server serves", name, ErrUnknownModel)
}

// setProgress records where e's load a stands and wakes the requests
// waiting on it; a report of a load that has ended is dropped.
func (p *Pool) setProgress(e *entry, a *attempt, pr Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.attempt != a || e.state != StateLoading {
		return
	}
	e.progress = pr
	close(e.changed)
	e.changed = make(chan struct{})
}

// Load loads a model by name, as its first request would, and returns
// once it is loaded (or why it cannot be).
func (p *Pool) Load(ctx context.Context, name string) error {
	_, release, err := p.acquire(ctx, name)
	if err != nil {
		return err
	}
	release()
	return nil
}

// Unload stops a loaded model by name or alias, pinned or not: it
// finishes what it is answering first (as an eviction does), and the
// next request loads it again. ErrUnknownModel for a name the pool does
// not serve, ErrNotLoaded for one that holds no server.
func (p *Pool) Unload(ctx context.Context, name string) error {
	p.mu.Lock()
	e, err := p.known(name)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	switch e.state {
	case StateLoaded:
	case StateLoading:
		p.mu.Unlock()
		return fmt.Errorf("%s is loading; unload it once it is loaded: %w", e.Name, ErrNotLoaded)
	default:
		p.mu.Unlock()
		return fmt.Errorf("%s is %s: %w", e.Name, e.state, ErrNotLoaded)
	}
	e.set(StateStopping)
	p.mu.Unlock()
	return p.stop(ctx, e, "unload", "unloaded by request")
}

// SetPinned pins or unpins a model by name or alias: a pinned model is
// never stopped to make room or for idleness. The pin lasts until the
// settings are reloaded or the server restarts.
func (p *Pool) SetPinned(name string, pinned bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, err := p.known(name)
	if err != nil {
		return err
	}
	if e.Pinned != pinned {
		e.Pinned = pinned
		word := "unpinned"
		if pinned {
			word = "pinned"
		}
		p.event(word, e.Name, nil, word+" by request")
	}
	return nil
}

// Configure replaces the models the pool serves from the start (new
// settings: a reloaded presets file). A model already served keeps its
// server, and its new settings apply from its next load (/api/instances
// says which run on older ones); one no longer named is served until it
// is stopped, then forgotten; a new one is added. Models marked Warm that
// are not loaded are loaded. A name given twice keeps its first.
func (p *Pool) Configure(models []ServedModel) {
	p.mu.Lock()
	defer p.mu.Unlock()
	named := map[string]bool{}
	for _, m := range models {
		if named[m.Name] {
			continue
		}
		named[m.Name] = true
		e := p.entries[m.Name]
		if e == nil {
			e = &entry{state: StateUnloaded, changed: make(chan struct{})}
			p.entries[m.Name] = e
		}
		e.ServedModel, e.requested = m, false
	}
	for name, e := range p.entries {
		if named[name] || e.requested {
			continue
		}
		if e.state == StateUnloaded && e.waiting == 0 {
			delete(p.entries, name)
			continue
		}
		// Served until it stops, then dropped as a request's model is.
		e.requested = true
	}
	for _, m := range models {
		if e := p.entries[m.Name]; m.Warm && e.state == StateUnloaded && !p.closed {
			p.startLoad(e)
		}
	}
}

// drainFor is how long stopping e waits for its requests in flight.
func (p *Pool) drainFor(e *entry) time.Duration {
	if e.Drain > 0 {
		return e.Drain
	}
	return p.drainTimeout()
}

// stale reports whether e runs on settings older than its present ones.
func (e *entry) stale() bool {
	if e.loadedAs == nil {
		return false
	}
	a, b := *e.loadedAs, e.ServedModel
	// Pins, aliases and idle times apply at once; the model and its
	// flags at the next load.
	return a.Ref != b.Ref || !slices.Equal(a.Flags, b.Flags)
}

// byBooking is the name of the model whose server holds booking id.
func (p *Pool) byBooking(id string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.entries {
		if e.child != nil && e.child.Booking().ID == id {
			return e.Name, true
		}
	}
	return "", false
}

// residents are the models that hold or are getting memory, but for
// the one named, as ChooseEvictions sees them; p.mu is held.
func (p *Pool) residents(but string) []Resident {
	var out []Resident
	for _, e := range p.entries {
		if e.Name == but || (e.state != StateLoaded && e.state != StateLoading) {
			continue
		}
		res := Resident{Name: e.Name, LastUsed: e.lastUsed, Pinned: e.Pinned, InFlight: e.inFlight, Loading: e.state == StateLoading}
		if e.child != nil {
			res.Need = e.child.Booking().Need
		}
		out = append(out, res)
	}
	return out
}

// makeRoom says which models the pool would stop for a model whose
// assessment on this machine, as it is now, falls short: the choice a
// load would make (ChooseEvictions), or why none would do; nil where
// nothing is short or no model holds memory.
func (p *Pool) makeRoom(model string, a *plan.Assessment) *report.MakeRoom {
	short := Shortfall(a)
	if len(short) == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.find(model); e != nil {
		model = e.Name
	}
	res := p.residents(model)
	if len(res) == 0 {
		return nil
	}
	chosen, err := ChooseEvictions(model, short, res)
	if err != nil {
		return &report.MakeRoom{Stop: []string{}, Says: err.Error()}
	}
	return &report.MakeRoom{Stop: chosen, Says: fmt.Sprintf("fits once the provider stops %s (%s), as a request for it would", strings.Join(chosen, ", "), shortSays(short))}
}

// Note records an event that is no load or stop (new settings read, or
// refused), with the others in /api/instances and the log.
func (p *Pool) Note(kind, model, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.event(kind, model, nil, reason)
}
