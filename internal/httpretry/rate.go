package httpretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Defaults for a Rate: a transfer that moves less than 64 KiB in 30 s is
// stalled or hostile (one byte a second would otherwise hold a read
// forever), while any real link, even a poor mobile one, moves far more.
const (
	DefaultMinBytes = 64 << 10
	DefaultWindow   = 30 * time.Second
)

// Rate is the least a transfer must move: MinBytes in every Window,
// counted from when the request is sent (waiting for the response counts).
type Rate struct {
	MinBytes int64
	Window   time.Duration
}

// TooSlow is a transfer that moved less than its Rate asks.
type TooSlow struct {
	Got  int64
	Rate Rate
}

func (e *TooSlow) Error() string {
	return fmt.Sprintf("expected at least %d bytes in every %v, the server sent %d in the last one", e.Rate.MinBytes, e.Rate.Window, e.Got)
}

// Guard cancels a context when a window passes with too few bytes.
type Guard struct {
	rate   Rate
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	got    int64
	timer  *time.Timer
	done   bool
}

// Watch returns a context that is cancelled with a *TooSlow cause (wrapped
// by wrap, when not nil) when a window of r passes with fewer than
// r.MinBytes reported through Add. A zero MinBytes or Window takes the
// default. Stop the guard when the transfer ends.
func (r Rate) Watch(parent context.Context, wrap func(error) error) (context.Context, *Guard) {
	if r.MinBytes <= 0 {
		r.MinBytes = DefaultMinBytes
	}
	if r.Window <= 0 {
		r.Window = DefaultWindow
	}
	ctx, cancel := context.WithCancelCause(parent)
	g := &Guard{rate: r, cancel: cancel}
	g.timer = time.AfterFunc(r.Window, func() { g.tick(wrap) })
	return ctx, g
}

func (g *Guard) tick(wrap func(error) error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done {
		return
	}
	if g.got < g.rate.MinBytes {
		var err error = &TooSlow{Got: g.got, Rate: g.rate}
		if wrap != nil {
			err = wrap(err)
		}
		g.done = true
		g.cancel(err)
		return
	}
	g.got = 0
	g.timer.Reset(g.rate.Window)
}

// Add counts n bytes received.
func (g *Guard) Add(n int) {
	g.mu.Lock()
	g.got += int64(n)
	g.mu.Unlock()
}

// Stop ends the watch and releases the context.
func (g *Guard) Stop() {
	g.mu.Lock()
	g.done = true
	g.mu.Unlock()
	g.timer.Stop()
	g.cancel(nil)
}

// Permanent is a failure that the same request would meet again: a
// redirect loop, a redirect to a scheme other than http or https. It is
// never retried.
type Permanent struct {
	Reason string
}

func (e *Permanent) Error() string { return e.Reason }

// IsPermanent reports whether err is, or wraps, a *Permanent.
func IsPermanent(err error) bool {
	var p *Permanent
	return errors.As(err, &p)
}

// maxRedirects is as many as Go's own client follows.
const maxRedirects = 10

// CheckRedirect is an http.Client.CheckRedirect that refuses, as a
// *Permanent error, a chain of more than ten redirects and a redirect to
// anything but http or https, so that neither is retried.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if s := req.URL.Scheme; s != "http" && s != "https" {
		return &Permanent{Reason: fmt.Sprintf("redirected to a %s: address; expected http or https", s)}
	}
	if len(via) >= maxRedirects {
		return &Permanent{Reason: fmt.Sprintf("stopped after %d redirects (a redirect loop?)", len(via))}
	}
	return nil
}
