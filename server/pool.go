package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/plan"
)

// States of a served model, as /v1/models and /api/instances say them.
const (
	StateUnloaded = "unloaded"
	StateLoading  = "loading"
	StateLoaded   = "loaded"
	// StateStopping is a model chosen to be stopped (evicted, idle, or its
	// server gone) that has not yet given its memory back.
	StateStopping = "stopping"
)

// ServedModel is a model the provider answers for under a name.
type ServedModel struct {
	// Name is what a request's "model" field says.
	Name string
	// Ref is what the Loader loads: a catalog variant, an hf: reference,
	// a file in the store or one of --models-dir.
	Ref string
	// Pinned models are never stopped to make room or for idleness.
	Pinned bool
	// Idle stops the model after this long without a request; 0 never.
	Idle time.Duration
	// Aliases are other names a request may give it by.
	Aliases []string
	// Search is how it is planned; nil is the Loader's own (serve-api's
	// flags).
	Search *plan.SearchOptions
	// Flags are the llama-server flags its settings give, as written
	// (Search holds what they mean), for /api/instances.
	Flags []string
	// Drain bounds how long stopping it waits for its requests in
	// flight; 0 is PoolConfig.Drain.
	Drain time.Duration
	// Warm loads it when the pool starts, or when new settings name it
	// (llama-server's load-on-startup), rather than on its first request.
	Warm bool
	// Source says where its settings come from (a presets file's line,
	// --models-dir, --pin), for /api/instances.
	Source string
}

// Progress is where a model's load stands, for the requests that wait
// on it and /api/instances.
type Progress struct {
	Step   string `json:"step"`
	Detail string `json:"detail,omitempty"`
	// Percent of the step done, 0 to 100; -1 where the step gives none.
	Percent float64 `json:"percent"`
}

// Child is a model the Loader started and proved ready.
type Child interface {
	URL() string
	// Booking is its booking in the admission ledger: the memory it holds
	// in each domain.
	Booking() admission.Booking
	Flags() []string
	// Exited is closed when its server exits, asked to or not.
	Exited() <-chan struct{}
	// Stop stops the server and releases the booking.
	Stop(ctx context.Context) error
}

// Loader starts models through the launch chain, making room through the
// pool's Room.
type Loader interface {
	Load(ctx context.Context, m ServedModel, room Room) (Child, error)
}

// Room is what a load may do about the pool's other models.
type Room struct {
	// Reclaimable reports whether the ledger booking with this id is a
	// model the pool would stop for this load (loaded and unpinned, busy or not):
	// the Loader plans as if its memory were free, so that a model that
	// fits once it is stopped gets its whole plan.
	Reclaimable func(bookingID string) bool
	// Evict is called with admission's refusal: it stops what it chooses
	// and returns nil, and the Loader admits again, or it returns why
	// nothing can be stopped (a *NoRoom), which the Loader returns.
	Evict func(context.Context, *admission.Refusal) error
	// Progress tells the requests waiting on the load where it stands.
	Progress func(Progress)
}

// PoolConfig says what a Pool serves and how.
type PoolConfig struct {
	Loader Loader
	// Models are served under their names from the start (a directory's
	// files, pins).
	Models []ServedModel
	// Accept says whether a request may name a model not in Models (a
	// catalog variant, an hf: reference, a store path), which is then
	// served under that name with Idle and no pin; nil accepts none.
	Accept func(ref string) error
	// Canonical is the one name of the model a request names (a store
	// path named as /s//m.gguf or /s/x/../m.gguf is /s/m.gguf), so one
	// file is one entry and one server; nil keeps names as given.
	Canonical func(ref string) string
	// Idle is the idle time-out of models not in Models; 0 never.
	Idle time.Duration
	// Queue bounds the requests waiting for one model to load; past it
	// they are answered 503 with Retry-After. DefaultQueue when 0.
	Queue int
	// Log receives one line for each load, eviction, refusal and exit.
	Log func(line string)
	// Drain bounds how long stopping a model (to make room, or when it
	// is idle) waits for its requests in flight: past it the server is
	// stopped under them. DefaultDrain when 0.
	Drain time.Duration
}

// DefaultDrain is how long a stop waits for requests in flight: longer
// than an answer takes, and what a stalled client can hold up a load.
const DefaultDrain = 30 * time.Second

// DefaultQueue is the requests that may wait for one model's load.
const DefaultQueue = 64

// maxEvents is how many loads, evictions and refusals /api/instances
// keeps.
const maxEvents = 256

// Event is one load, eviction, refusal, exit or idle stop, with its reason.
type Event struct {
	Time  time.Time `json:"time"`
	Kind  string    `json:"kind"`
	Model string    `json:"model"`
	// Memory is the bytes per domain the model held or would have held.
	Memory map[string]int64 `json:"memory,omitempty"`
	Reason string           `json:"reason"`
}

// Pool serves models on demand: a request for one that is not loaded
// loads it, stopping idle ones when the ledger says there is no room.
// Loads run one at a time, so no two choose their evictions from the
// same picture.
type Pool struct {
	cfg    PoolConfig
	base   context.Context
	cancel context.CancelFunc
	loadMu sync.Mutex // held across a load and the evictions it makes
	wg     sync.WaitGroup

	mu      sync.Mutex
	cond    *sync.Cond // signalled when a request ends
	entries map[string]*entry
	events  []Event
	closed  bool
	stats   poolStats
}

type entry struct {
	ServedModel
	state    string
	child    Child
	inFlight int
	lastUsed time.Time
	// attempt is the load in progress or the last one; waiters read its
	// result once done is closed.
	attempt *attempt
	waiting int
	// changed is closed, and replaced, at every change of state.
	changed chan struct{}
	// requested is an entry a request made (Accept), not one of
	// PoolConfig.Models: it is dropped when its load fails and when
	// too many such entries stand unloaded.
	requested bool
	// progress is where its load stands while it loads.
	progress Progress
	// loadedAs are the settings its server was started with; they differ
	// from ServedModel's when new settings came while it ran.
	loadedAs *ServedModel
}

// progressEvery is how often a request waiting for a load hears where it
// stands when nothing changed.
const progressEvery = 2 * time.Second

// maxRequested bounds the entries requests made that stand unloaded: a
// client naming thousands of models leaves at most this many behind.
const maxRequested = 64

type attempt struct {
	done chan struct{}
	err  error
}

// failed reports whether the load ended in an error.
func (a *attempt) failed() bool {
	select {
	case <-a.done:
		return a.err != nil
	default:
		return false
	}
}

// set moves e to a state and wakes the requests waiting on it; p.mu is
// held.
func (e *entry) set(state string) {
	e.state = state
	close(e.changed)
	e.changed = make(chan struct{})
}

// NewPool starts a pool whose children live until Close.
func NewPool(cfg PoolConfig) *Pool {
	if cfg.Queue <= 0 {
		cfg.Queue = DefaultQueue
	}
	base, cancel := context.WithCancel(context.Background())
	p := &Pool{cfg: cfg, base: base, cancel: cancel, entries: map[string]*entry{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.janitor()
	p.Configure(cfg.Models)
	return p
}

// Busy is a request turned away because too many wait for its model
// already; the API answers 503 with Retry-After.
type Busy struct {
	Model      string
	RetryAfter time.Duration
}

func (e *Busy) Error() string {
	return fmt.Sprintf("%s is loading and %d requests wait for it already; retry in %s", e.Model, int(e.RetryAfter.Seconds()), e.RetryAfter)
}

// ErrUnknownModel is a request naming a model the pool does not serve.
var ErrUnknownModel = errors.New("no such model")

// acquire returns the model's server, loading it first if need be; call
// release when the request is answered.
func (p *Pool) acquire(ctx context.Context, name string) (Child, func(), error) {
	return p.acquireWith(ctx, name, nil)
}

// acquireWith is acquire that, while the request waits for a load, calls
// onWait (p.mu not held) with where the load stands, at the start and at
// each change.
func (p *Pool) acquireWith(ctx context.Context, name string, onWait func(Progress)) (Child, func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, err := p.entry(name)
	if err != nil {
		return nil, nil, err
	}
	for {
		if p.closed {
			return nil, nil, errors.New("the server is shutting down")
		}
		switch e.state {
		case StateLoaded:
			e.inFlight++
			e.lastUsed = time.Now()
			c := e.child
			return c, func() { p.release(e) }, nil
		case StateUnloaded:
			p.startLoad(e)
		}
		// Loading, or stopping before it loads again.
		if e.waiting >= p.cfg.Queue {
			return nil, nil, &Busy{Model: name, RetryAfter: 5 * time.Second}
		}
		changed, a, pr := e.changed, e.attempt, e.progress
		if e.state != StateLoading {
			// Stopping: its last load's progress is not this one's.
			pr = Progress{Step: "queued", Detail: "it is stopping, and loads again after", Percent: -1}
		}
		e.waiting++
		p.mu.Unlock()
		var keepAlive <-chan time.Time
		var t *time.Timer
		if onWait != nil {
			onWait(pr)
			// A step that says nothing for long (a queue, a slow
			// plan) is said again, so that no proxy between takes the
			// quiet stream for a dead one.
			t = time.NewTimer(progressEvery)
			keepAlive = t.C
		}
		select {
		case <-changed:
		case <-keepAlive:
		case <-ctx.Done():
		}
		if t != nil {
			t.Stop()
		}
		p.mu.Lock()
		e.waiting--
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if a != nil && e.state != StateLoaded && a.failed() {
			return nil, nil, a.err
		}
	}
}

// entry finds or, for a reference Accept allows, creates a model's
// entry; p.mu is held.
func (p *Pool) entry(name string) (*entry, error) {
	if e := p.find(name); e != nil {
		return e, nil
	}
	if p.cfg.Canonical != nil {
		name = p.cfg.Canonical(name)
		if e := p.find(name); e != nil {
			return e, nil
		}
	}
	if p.cfg.Accept == nil {
		return nil, fmt.Errorf("%q: %w; GET /v1/models lists the ones this server serves", name, ErrUnknownModel)
	}
	if err := p.cfg.Accept(name); err != nil {
		return nil, err
	}
	p.trimRequested()
	e := &entry{ServedModel: ServedModel{Name: name, Ref: name, Idle: p.cfg.Idle}, state: StateUnloaded, changed: make(chan struct{}), requested: true}
	p.entries[name] = e
	return e, nil
}

// trimRequested drops the least recently used entries requests made that
// stand unloaded with nobody waiting, down to maxRequested-1, before one
// more is added; p.mu is held.
func (p *Pool) trimRequested() {
	var idle []*entry
	for _, e := range p.entries {
		if e.requested && e.state == StateUnloaded && e.waiting == 0 && e.inFlight == 0 {
			idle = append(idle, e)
		}
	}
	if len(idle) < maxRequested {
		return
	}
	slices.SortFunc(idle, func(a, b *entry) int { return a.lastUsed.Compare(b.lastUsed) })
	for _, e := range idle[:len(idle)-maxRequested+1] {
		delete(p.entries, e.Name)
	}
}

func (p *Pool) release(e *entry) {
	p.mu.Lock()
	e.inFlight--
	e.lastUsed = time.Now()
	p.mu.Unlock()
	p.cond.Broadcast()
}

// startLoad begins loading e in the background, detached from the request
// that asked: others may wait on the same load; p.mu is held.
func (p *Pool) startLoad(e *entry) {
	a := &attempt{done: make(chan struct{})}
	e.attempt = a
	e.progress = Progress{Step: "queued", Detail: "waiting for the loads before it", Percent: -1}
	e.set(StateLoading)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		started := time.Now()
		p.loadMu.Lock()
		p.mu.Lock()
		sm := e.ServedModel
		p.mu.Unlock()
		c, err := p.cfg.Loader.Load(p.base, sm, Room{
			Reclaimable: func(id string) bool { return p.reclaimable(e.Name, id) },
			Evict:       func(ctx context.Context, r *admission.Refusal) error { return p.evictFor(ctx, e.Name, r) },
			Progress:    func(pr Progress) { p.setProgress(e, a, pr) },
		})
		p.loadMu.Unlock()
		p.mu.Lock()
		switch {
		case err == nil && p.closed:
			p.mu.Unlock()
			stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			c.Stop(stopCtx)
			cancel()
			p.mu.Lock()
			a.err = errors.New("the server is shutting down")
			e.set(StateUnloaded)
		case err == nil:
			e.child, e.lastUsed, e.loadedAs = c, time.Now(), &sm
			e.set(StateLoaded)
			b := c.Booking()
			p.stats.loaded(time.Since(started))
			p.event("load", e.Name, b.Need, fmt.Sprintf("ready in %.1f s, admitted as booking %s", time.Since(started).Seconds(), b.ID))
			p.wg.Add(1)
			go p.watch(e, c)
		default:
			a.err = err
			kind := "failure"
			var nr *NoRoom
			var refused *Refused
			switch {
			case errors.As(err, &nr):
				kind = "refusal"
				p.stats.count(&p.stats.refusals, "no_room")
			case errors.As(err, &refused):
				kind = "refusal"
				p.stats.count(&p.stats.refusals, "does_not_fit")
			default:
				p.stats.failures++
			}
			p.event(kind, e.Name, nil, err.Error())
			close(a.done)
			e.set(StateUnloaded)
			if e.requested && p.entries[e.Name] == e {
				// A name whose load failed is not kept: the waiters
				// have the attempt's error, and /v1/models lists only
				// what was served or could be.
				delete(p.entries, e.Name)
			}
			p.mu.Unlock()
			return
		}
		close(a.done)
		p.mu.Unlock()
	}()
}

// reclaimable reports whether booking id is a model other than loading
// that evictFor may choose: loaded and unpinned. One with requests in
// flight counts: evictFor stops it once they are answered.
func (p *Pool) reclaimable(loading, id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.entries {
		if e.Name == loading || e.state != StateLoaded || e.child == nil || e.child.Booking().ID != id {
			continue
		}
		return Resident{Pinned: e.Pinned}.evictable() // busy or not
	}
	return false
}

// evictFor makes room for the model loading, as ChooseEvictions says, or
// returns why it cannot; it runs under loadMu, inside the Loader's load.
func (p *Pool) evictFor(ctx context.Context, loading string, r *admission.Refusal) error {
	short := Shortfall(r.Assessment)
	p.mu.Lock()
	if len(short) == 0 {
		// Refused for a device limit no domain's memory would cure.
		p.mu.Unlock()
		return r
	}
	chosen, err := ChooseEvictions(loading, short, p.residents(loading))
	if err != nil {
		p.mu.Unlock()
		return err
	}
	var victims []*entry
	for _, name := range chosen {
		e := p.entries[name]
		e.set(StateStopping)
		victims = append(victims, e)
	}
	p.mu.Unlock()
	var errs []error
	for _, e := range victims {
		reason := fmt.Sprintf("stopped to make room for %s (%s)", loading, shortSays(short))
		errs = append(errs, p.stop(ctx, e, "eviction", reason))
	}
	return errors.Join(errs...)
}

// PoolModel is one served model's state, for /v1/models and
// /api/instances.
type PoolModel struct {
	ServedModel
	State    string
	Child    Child
	InFlight int
	Waiting  int
	LastUsed time.Time
	// Progress is where its load stands while it loads.
	Progress Progress
	// Stale says its server runs on settings older than its present ones.
	Stale bool
}

// Models lists the models the pool knows, by name.
func (p *Pool) Models() []PoolModel {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]PoolModel, 0, len(p.entries))
	for _, e := range p.entries {
		out = append(out, PoolModel{ServedModel: e.ServedModel, State: e.state, Child: e.child, InFlight: e.inFlight, Waiting: e.waiting, LastUsed: e.lastUsed,
			Progress: e.progress, Stale: e.stale()})
	}
	slices.SortFunc(out, func(a, b PoolModel) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// Events returns the loads, evictions and refusals kept, oldest first.
func (p *Pool) Events() []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.events)
}
