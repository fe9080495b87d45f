package store

import (
	"context"
	"time"
)

// Phase says what is happening to a file.
type Phase string

// The phases of a file, in the order they can occur.
const (
	// PhaseWait: another pull holds the file's lock; this one waits for
	// it and will then find the blob present.
	PhaseWait Phase = "wait"
	// PhaseVerify: the bytes an earlier run left on disk are being
	// hashed before the download continues, or an installed blob that
	// changed on disk since it was verified is hashed again.
	PhaseVerify Phase = "verify"
	// PhaseDownload: bytes are arriving.
	PhaseDownload Phase = "download"
	// PhasePresent: the blob was already in the store; nothing was
	// downloaded. Final.
	PhasePresent Phase = "present"
	// PhaseDone: the file was downloaded, verified and installed. Final.
	PhaseDone Phase = "done"
)

// Progress describes one file of a pull.
type Progress struct {
	// File is the file's base name.
	File string
	// Index counts files from 1 up to Count, model files first.
	Index, Count int
	Phase        Phase
	// Done and Total are bytes of this file; Total is -1 when unknown.
	// In PhaseVerify, Done counts the bytes hashed out of Resumed.
	Done, Total int64
	// Resumed is how many bytes were already on disk when the download
	// (re)started.
	Resumed int64
	// Rate is in bytes per second over the last few seconds; 0 when not
	// yet known.
	Rate float64
	// ETA is the time left at Rate; 0 when unknown.
	ETA time.Duration
}

const (
	// progressEvery spaces calls to Store.Progress.
	progressEvery = 100 * time.Millisecond
	// rateWindow is how far back the rate looks, long enough to smooth
	// bursts, short enough to follow a changing link.
	rateWindow = 5 * time.Second
)

// reporter throttles the progress of one file and works out its rate.
type reporter struct {
	fn   func(Progress)
	p    Progress
	last time.Time
	m    meter
}

func (s *Store) reporter(ctx context.Context, j job) *reporter {
	fn := s.Progress
	if f, ok := ctx.Value(progressKey{}).(func(Progress)); ok {
		fn = f
	}
	return &reporter{fn: fn, p: Progress{File: j.base, Index: j.index, Count: j.count, Total: j.file.Size}}
}

type progressKey struct{}

// WithProgress returns a context whose pulls report to fn instead of
// Store.Progress: one store serves many pulls at once (an API's loads),
// and each has its own listener.
func WithProgress(ctx context.Context, fn func(Progress)) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

func (r *reporter) waiting() { r.emit(PhaseWait, 0, r.p.Total, r.p.Resumed, true) }

func (r *reporter) verify(done, resumed int64) {
	r.emit(PhaseVerify, done, r.p.Total, resumed, false)
}

func (r *reporter) download(done, total, resumed int64) {
	r.emit(PhaseDownload, done, total, resumed, false)
}

func (r *reporter) final(phase Phase, size int64) {
	r.emit(phase, size, size, r.p.Resumed, true)
}

func (r *reporter) emit(phase Phase, done, total, resumed int64, force bool) {
	if r.fn == nil {
		return
	}
	now := time.Now()
	if phase == PhaseDownload {
		r.m.add(now, done)
	}
	if !force && phase == r.p.Phase && now.Sub(r.last) < progressEvery {
		return
	}
	r.last = now
	r.p.Phase, r.p.Done, r.p.Total, r.p.Resumed = phase, done, total, resumed
	r.p.Rate, r.p.ETA = 0, 0
	if phase == PhaseDownload || phase == PhaseDone {
		r.p.Rate = r.m.rate(now, done)
		if r.p.Rate > 0 && total > done {
			r.p.ETA = time.Duration(float64(total-done) / r.p.Rate * float64(time.Second))
		}
	}
	r.fn(r.p)
}

// meter measures a rate over the last rateWindow from samples of a
// growing count.
type meter struct {
	samples []sample
}

type sample struct {
	t time.Time
	n int64
}

// add records that n bytes were done at t. Samples are kept at most every
// progressEvery, so the window holds a bounded number of them.
func (m *meter) add(t time.Time, n int64) {
	if k := len(m.samples); k > 0 && n < m.samples[k-1].n {
		m.samples = m.samples[:0] // the download started over
	}
	if k := len(m.samples); k == 0 || t.Sub(m.samples[k-1].t) >= progressEvery {
		m.samples = append(m.samples, sample{t, n})
	}
	// Keep the newest sample older than the window as the baseline.
	drop := 0
	for drop+1 < len(m.samples) && t.Sub(m.samples[drop+1].t) >= rateWindow {
		drop++
	}
	if drop > 0 {
		m.samples = append(m.samples[:0], m.samples[drop:]...)
	}
}

// rate returns bytes per second from the oldest kept sample to (t, n), or
// 0 while too little time has passed to tell.
func (m *meter) rate(t time.Time, n int64) float64 {
	if len(m.samples) == 0 {
		return 0
	}
	o := m.samples[0]
	dt := t.Sub(o.t)
	if dt < progressEvery || n < o.n {
		return 0
	}
	return float64(n-o.n) / dt.Seconds()
}
