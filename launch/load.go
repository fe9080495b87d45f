package launch

import (
	"context"
	"errors"
	"fmt"
	"github.com/headroom-llm/headroom/hw"
	"io"
	"time"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/plan"
)

// LoadOptions say how to start llama-server.
type LoadOptions struct {
	// Bin is llama-server's path (see engine.Find).
	Bin    string
	Ledger *admission.Ledger
	Host   string
	Port   int
	// ReadyTimeout bounds the load and the first completion; 10 minutes
	// when 0, since a large model read from a slow disk takes minutes.
	ReadyTimeout time.Duration
	// Log receives the engine's own output; nil discards it.
	Log io.Writer
	// Extra are flags added after the plan's (for example --alias).
	Extra []string
	// Env holds variables added to llama-server's environment.
	Env []string
	// Observations, when set, is the directory where what a load
	// allocated beyond its plan is kept by key, and read back when the
	// same key loads again.
	Observations string
	// Records, when set, is the directory each ready load writes its
	// Record to.
	Records string
	// Projected, when set, is what the user's llama.cpp projected for this
	// plan beyond headroom's accounting; the load is admitted with it.
	Projected *Projected
	// Evict, when set, is asked to make room when the ledger refuses the
	// load: it stops what it chooses and returns nil, and the load is
	// admitted again against a fresh snapshot (up to evictTries times), or
	// it returns why nothing can be stopped, which the load returns.
	Evict func(ctx context.Context, r *admission.Refusal) error
	// Progress, when set, hears each step of the launch and how far the
	// download and the load of the weights have come (llama-server is
	// then started as a router's child, engine.Options.OnProgress).
	Progress func(Progress)
}

// evictTries bounds how often a load asks Evict for room: memory an
// evicted server gave back may show in a snapshot a moment late.
const evictTries = 4

// Running is a model headroom started and proved ready.
type Running struct {
	Server *engine.Server
	Ticket *admission.Ticket
	// Flags are the llama-server flags it was started with, -m aside.
	Flags []string
	// Reconciliation compares llama.cpp's logged buffers with the plan.
	Reconciliation engine.Reconciliation
	// Reused says the load judged the preview's accounting again instead
	// of computing a new one (nothing in its Key changed).
	Reused bool
	// Recorded is the path of the load's Record, when one was written.
	Recorded string
	// Observed is what an earlier load of the same key allocated beyond
	// its plan, added to this load's admission; nil when nothing was.
	Observed *Observed
}

// Stop stops the server and gives its memory back to the ledger.
func (r *Running) Stop(ctx context.Context) error {
	return errors.Join(r.Server.Stop(ctx), r.Ticket.Release())
}

// Load admits the assessed model again against a fresh snapshot, beside
// what the ledger already holds, starts llama-server with the plan's
// flags and the file at path, and returns once a real completion
// succeeded. On any failure the server is stopped and the booking
// released.
func (d *Deps) Load(ctx context.Context, a *Assessed, path string, o LoadOptions) (*Running, error) {
	c := a.Chosen()
	if c == nil {
		return nil, &NotFit{Ref: a.Model.Ref, Verdict: plan.DoesNotFit, Why: a.Plan.Explain}
	}
	ch, err := d.charge(ctx, a, c, path, o)
	if err != nil {
		return nil, err
	}
	r, fresh, key, seen, reused := ch.result, ch.fresh, ch.key, ch.seen, ch.reused
	ledger := o.Ledger
	if ledger == nil {
		ledger = &admission.Ledger{}
	}
	// A llama-server whose headroom was killed holds memory nobody can
	// give back; end it before judging this load beside it.
	ReapOrphans(ctx, ledger, func(format string, args ...any) { d.say(string(engine.StateLoading), format, args...) })
	o.progress(StepAdmitting, "", -1)
	t, err := d.admit(ctx, ledger, a.Model.Ref, r, fresh, o.Evict)
	if err != nil {
		return nil, err
	}
	d.say(string(engine.StateLoading), "admitted (%s); starting %s", t.Assessment.Reason, o.Bin)
	// The plan named the companions before they were pulled; llama-server
	// gets the files.
	flags := append(companionFlags(c.Flags, a.Model.Companions), o.Extra...)
	var onProgress func(engine.LoadProgress)
	if o.Progress != nil {
		o.progress(StepLoading, "starting llama-server", 0)
		onProgress = func(p engine.LoadProgress) {
			if p.Stage == engine.StageLoaded {
				o.progress(StepWarming, "a first completion proves it ready", -1)
				return
			}
			o.progress(StepLoading, p.Stage, p.Value)
		}
	}
	srv, err := engine.Start(ctx, engine.Options{
		OnProgress: onProgress,
		Bin:        o.Bin, Args: flags, Model: path, Host: o.Host, Port: o.Port, Log: o.Log, Env: o.Env,
		OnState: func(s engine.State) {
			if s == engine.StateLoading {
				d.say(string(s), "llama-server is loading the model; ready after a real %s", engine.Proof(flags))
			}
		},
	})
	if err != nil {
		return nil, errors.Join(err, t.Release())
	}
	// From here the booking names the server too: it stays while the
	// server runs, even if this process is killed.
	if err := t.Attach(srv.PID(), srv.ProcessGroup()); err != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return nil, errors.Join(err, srv.Stop(stopCtx), t.Release())
	}
	timeout := o.ReadyTimeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	if err := srv.WaitReady(ctx, timeout); err != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if serr := srv.Stop(stopCtx); serr != nil {
			err = errors.Join(err, fmt.Errorf("stopping llama-server: %w", serr))
		}
		return nil, errors.Join(err, t.Release())
	}
	if err := t.Started(); err != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return nil, errors.Join(err, srv.Stop(stopCtx), t.Release())
	}
	// A draft is a second load after the model's, with its context: the
	// last two loads are the plan's.
	loads := 1
	if c := a.Model.Companions; c != nil && c.Draft != nil {
		loads = 2
	}
	logged := engine.LastLoads(srv.Logged(), loads)
	// The reconciliation is with the plan itself, not with what an
	// earlier run or llama.cpp's projection added to it for admission
	// (each appended its rows after the plan's buffers).
	added := 0
	if seen != nil {
		added += len(seen.Rows)
	}
	if p := o.Projected; p != nil {
		added += len(p.Rows)
	}
	planned := r.Buffers[:len(r.Buffers)-added]
	rec := engine.Reconcile(planned, logged)
	if a.Projector != nil {
		rec = engine.ReconcileProjected(planned, logged)
	}
	run := &Running{Server: srv, Ticket: t, Flags: flags, Reused: reused, Reconciliation: rec, Observed: seen}
	d.keep(run, o, Record{Time: time.Now().UTC(), Ref: a.Model.Ref, Artifacts: key.Artifacts, Engine: key.Engine, Machine: key.Topology,
		Flags: flags, Planned: planned, Logged: logged, Diff: rec, Summary: rec.Summary()}, key)
	return run, nil
}

// admit books the load in the ledger, asking evict for room each time it
// is refused.
func (d *Deps) admit(ctx context.Context, l *admission.Ledger, ref string, r *plan.Result, fresh *hw.Snapshot, evict func(context.Context, *admission.Refusal) error) (*admission.Ticket, error) {
	t, err := l.Admit(ref, r, fresh)
	for try := 0; try < evictTries && evict != nil; try++ {
		var refusal *admission.Refusal
		if !errors.As(err, &refusal) {
			break
		}
		if err := evict(ctx, refusal); err != nil {
			return nil, err
		}
		if try > 0 {
			// What a stopped server gave back may take a moment to show.
			select {
			case <-time.After(time.Duration(try) * 100 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if fresh, err = d.Machine(ctx); err != nil {
			return nil, err
		}
		t, err = l.Admit(ref, r, fresh)
	}
	return t, err
}

// charged is what a load is admitted with: the accounting against a fresh
// snapshot, with what earlier loads of the same key allocated beyond the
// plan and llama.cpp's own projection added where they count more.
type charged struct {
	result *plan.Result
	fresh  *hw.Snapshot
	key    admission.Key
	seen   *Observed
	reused bool
}

func (d *Deps) charge(ctx context.Context, a *Assessed, c *plan.Candidate, path string, o LoadOptions) (charged, error) {
	d.say(string(engine.StateLoading), "re-assessing with a fresh snapshot before the load")
	fresh, err := d.Machine(ctx)
	if err != nil {
		return charged{}, err
	}
	cpu, gpus := plan.Devices(fresh)
	ch := charged{fresh: fresh, key: d.key(a.Model, fresh, c, a.Options)}
	if d.Cache != nil {
		ch.result, ch.reused = d.Cache.Get(ch.key)
	}
	if !ch.reused {
		if a.Projector != nil {
			ch.result, err = projectLoad(ctx, a, path, cpu, gpus)
		} else {
			ch.result, err = plan.Account(a.Model.Arch, c.Profile, cpu, gpus)
		}
		if err != nil {
			return charged{}, err
		}
		if d.Cache != nil {
			d.Cache.Put(ch.key, ch.result)
		}
	}
	if o.Observations != "" {
		if ch.seen, err = observed(o.Observations, ch.key); err != nil {
			ch.seen = nil
			d.say(string(engine.StateLoading), "ignoring an unreadable observation: %v", err)
		} else if ch.seen != nil {
			ch.result = ch.seen.apply(ch.result, cpu.Name)
			d.say(string(engine.StateLoading), "admitting with what an earlier load of the same key allocated beyond the plan (%s)", ch.seen.Record)
		}
	}
	if p := o.Projected; p != nil && len(p.Rows) > 0 {
		ch.result = p.apply(ch.result, cpu.Name)
		d.say(string(engine.StateLoading), "admitting with llama.cpp's own projection where it counts more than the plan (%s)", p.Says())
	}
	return ch, nil
}

// keep writes the load's record under o.Records and what the engine
// allocated beyond the plan under o.Observations; a failure to write is
// said, never fatal to a server that is ready.
func (d *Deps) keep(run *Running, o LoadOptions, rec Record, key admission.Key) {
	var err error
	if o.Records != "" {
		if run.Recorded, err = writeRecord(o.Records, rec); err != nil {
			d.say(string(engine.StateReady), "could not record the engine's buffers: %v", err)
		}
	}
	if o.Observations != "" {
		if err := observe(o.Observations, key, run.Reconciliation, run.Recorded); err != nil {
			d.say(string(engine.StateReady), "could not keep what the engine allocated: %v", err)
		}
	}
}

// ReapOrphans ends the llama-servers of the ledger whose headroom was
// killed, saying each one stopped (or why none could be), and each stale
// booking dropped unsignalled because nothing proved its process was a
// llama-server headroom started.
func ReapOrphans(ctx context.Context, l *admission.Ledger, say func(format string, args ...any)) {
	reaped, err := l.Reap(ctx, engine.DefaultGrace)
	if err != nil {
		say("%v", err)
		return
	}
	for _, d := range reaped.Dropped {
		say("dropped booking %s (%s) without signalling anything: %s", d.Booking.ID, d.Booking.Model, d.Why)
	}
	for _, b := range reaped.Stopped {
		say("stopped llama-server %d (%s), left running by a headroom (pid %d) that was killed", b.ChildPID, b.Model, b.PID)
	}
}
