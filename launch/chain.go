package launch

import (
	"context"
	"errors"
	"fmt"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/store"
)

// Options say how Launch takes a reference to a running server.
type Options struct {
	// Search steers the plan search.
	Search plan.SearchOptions
	// Store receives what is pulled.
	Store *store.Store
	// NoPull serves only what is local or already in Store.
	NoPull bool
	// EngineCheck runs Preflight before anything is downloaded: a plan
	// llama.cpp's own projection no longer lets fit is refused (a
	// *NotFit), and the load is admitted with what it counts beyond the
	// plan.
	EngineCheck bool
	// Load says how to start llama-server; Launch sets its Projected.
	Load LoadOptions
	// Reclaim, when set, has the plan searched with the memory of the
	// Load.Ledger bookings it reports true for (models Load.Evict may
	// stop) counted as free, as it will be once they are stopped (see
	// Reclaiming). Without it a probe's free memory already lacks what
	// the loaded models hold, and a model that fits once an idle one is
	// stopped would be planned smaller, or refused, before admission
	// could evict.
	Reclaim func(admission.Booking) bool
}

// Progress is where a launch stands, for someone waiting on it: the
// step, a line about it, and the fraction of the step done, -1 where the
// step gives none (planning), 0 to 1 where it does (the download, the
// load of the weights).
type Progress struct {
	Step     string
	Detail   string
	Fraction float64
}

// The steps of a launch, in order.
const (
	StepResolving   = "resolving"
	StepPlanning    = "planning"
	StepDownloading = "downloading"
	StepAdmitting   = "admitting"
	StepLoading     = "loading"
	StepWarming     = "warming up"
)

// progress tells o.Load.Progress, where set.
func (o *LoadOptions) progress(step, detail string, fraction float64) {
	if o.Progress != nil {
		o.Progress(Progress{Step: step, Detail: detail, Fraction: fraction})
	}
}

// Launch is the whole chain, as serve and the API run it: resolve the
// reference, assess it on a snapshot, ask llama.cpp's own projection
// (o.EngineCheck), pull the model unless it is local, fetch its projector
// and draft, and load it. A model that does not fit, by the plan or by
// the projection, is a *NotFit before any byte of its weights moves; one
// that does not fit beside what the ledger holds is an
// *admission.Refusal.
func (d *Deps) Launch(ctx context.Context, ref string, o Options) (*Running, error) {
	o.Load.progress(StepResolving, ref, -1)
	m, err := d.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	o.Load.progress(StepPlanning, "", -1)
	a, err := d.assessBeside(ctx, m, o)
	if err != nil {
		return nil, err
	}
	lo := o.Load
	if o.EngineCheck {
		if p := d.Preflight(ctx, a); p != nil {
			if err := a.AdmitProjected(p); err != nil {
				return nil, err
			}
			lo.Projected = p
		}
	}
	if o.Load.Progress != nil && !m.Local() {
		ctx = store.WithProgress(ctx, func(p store.Progress) {
			f := -1.0
			if p.Total > 0 {
				f = float64(p.Done) / float64(p.Total)
			}
			o.Load.progress(StepDownloading, fmt.Sprintf("%s (%d of %d), %s", p.File, p.Index, p.Count, p.Phase), f)
		})
	}
	path, man, err := d.files(ctx, m, o.Store, o.NoPull)
	if err != nil {
		return nil, err
	}
	if err := d.companionFiles(ctx, m, man, o.Store, o.NoPull); err != nil {
		return nil, err
	}
	return d.Load(ctx, a, path, lo)
}

// files is where the model's first file is on this machine, pulling it
// into st unless noPull; the manifest is nil for a local model.
func (d *Deps) files(ctx context.Context, m *Model, st *store.Store, noPull bool) (string, *store.Manifest, error) {
	switch {
	case m.Local():
		return m.Header.Artifact.Files[0].Path, nil, nil
	case noPull:
		found, ok, err := st.Lookup(m.Header.Artifact.Repo, m.Header.Artifact.Commit, m.fileNames())
		if err != nil {
			return "", nil, err
		}
		if !ok {
			return "", nil, errors.New(m.Ref + " is not in the store and --no-pull forbids downloading it; run headroom pull first")
		}
		return found.Files[0].Path, found, nil
	}
	p, err := d.Pull(ctx, m, nil, st, false)
	if err != nil {
		return "", nil, err
	}
	return p.Path, p.Manifest, nil
}

// fileNames are the names of the model's files, as the store keeps them.
func (m *Model) fileNames() []string {
	var out []string
	for _, f := range m.Header.Artifact.Files {
		out = append(out, f.Name)
	}
	return out
}
