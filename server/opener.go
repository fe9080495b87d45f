package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/headroom-llm/headroom/arch"
)

// Defaults for the opener: real headers parse in well under a second, so
// two at a time keep the panel responsive while a header that takes its
// whole 256 MiB budget can hold at most two budgets' worth of memory.
const (
	DefaultMaxOpens = 2
	openTTL         = 10 * time.Minute
	openFailTTL     = time.Minute
	openEntries     = 64
)

// opener runs Config.Open at most a few at a time, shares one open among
// the requests that ask for the same reference at once, and keeps results
// (failures for less long) so that a reference asked for again, by the
// panel re-planning or by a page repeating a request, is not parsed again.
// An open runs detached from the request that started it, bounded by the
// source's own deadline and memory budget, so that a client hanging up does
// not fail the others waiting on it.
type opener struct {
	open  func(context.Context, string) (*arch.Model, error)
	slots chan struct{}

	mu      sync.Mutex
	entries map[string]*openEntry
	order   []string // oldest first, for eviction
}

type openEntry struct {
	done chan struct{}
	m    *arch.Model
	err  error
	at   time.Time
}

func newOpener(open func(context.Context, string) (*arch.Model, error), max int) *opener {
	if max <= 0 {
		max = DefaultMaxOpens
	}
	return &opener{open: open, slots: make(chan struct{}, max), entries: map[string]*openEntry{}}
}

func (o *opener) get(ctx context.Context, ref string) (*arch.Model, error) {
	o.mu.Lock()
	e, ok := o.entries[ref]
	if ok && e.expired() {
		o.drop(ref)
		ok = false
	}
	if !ok {
		e = &openEntry{done: make(chan struct{})}
		o.entries[ref] = e
		o.order = append(o.order, ref)
		for len(o.order) > openEntries {
			o.drop(o.order[0])
		}
		go o.run(context.WithoutCancel(ctx), ref, e)
	}
	o.mu.Unlock()
	select {
	case <-e.done:
		return e.m, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (o *opener) run(ctx context.Context, ref string, e *openEntry) {
	o.slots <- struct{}{}
	defer func() { <-o.slots }()
	e.m, e.err = o.open(ctx, ref)
	e.at = time.Now()
	if errors.Is(e.err, context.Canceled) || errors.Is(e.err, context.DeadlineExceeded) {
		o.mu.Lock()
		if o.entries[ref] == e {
			o.drop(ref)
		}
		o.mu.Unlock()
	}
	close(e.done)
}

// expired reports whether a finished entry is too old to answer from.
func (e *openEntry) expired() bool {
	select {
	case <-e.done:
	default:
		return false // still opening: share it
	}
	ttl := openTTL
	if e.err != nil {
		ttl = openFailTTL
	}
	return time.Since(e.at) > ttl
}

// drop forgets ref; o.mu is held.
func (o *opener) drop(ref string) {
	delete(o.entries, ref)
	for i, r := range o.order {
		if r == ref {
			o.order = append(o.order[:i], o.order[i+1:]...)
			break
		}
	}
}
