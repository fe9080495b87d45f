package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/launch"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/server"
	"github.com/headroom-llm/headroom/source"
	"github.com/headroom-llm/headroom/store"
)

// apiRuntime loads models for the HTTP API: the same chain as serve, with
// one ledger for every load, so concurrent requests are admitted one
// against another. Children live as long as base, the API process.
type apiRuntime struct {
	base   context.Context
	d      *launch.Deps
	st     *store.Store
	ledger *admission.Ledger
	bin    string
	opts   plan.SearchOptions
	ready  time.Duration

	// dir maps the names of --models-dir's files to their paths; a
	// request names them, never the path.
	dir map[string]string
	// pool serves the OpenAI-compatible endpoints; stopAll closes it.
	pool *server.Pool
	// settings are the served models and how each is run.
	settings *modelSettings

	mu   sync.Mutex
	runs map[string]*apiInstance
}

type apiInstance struct {
	info server.Instance
	run  *launch.Running
}

// checkRef accepts what a request may name: catalog variants, hf:
// references and files inside the store. A path elsewhere or a URL would
// let a request read any file or reach any host.
func (rt *apiRuntime) checkRef(ref string) error {
	if rt.d.Catalog != nil {
		// FindRef, as Resolve reads the reference: a file named like a
		// variant is a file, and must be inside the store.
		if e, _, err := rt.d.Catalog.FindRef(ref); e != nil {
			return nil
		} else if err != nil {
			// A mistyped entry, or one without that quantization.
			return notExist{err}
		}
	}
	r, err := source.ParseRef(ref)
	if err != nil {
		return err
	}
	switch r.Kind {
	case source.KindHF:
		return nil
	case source.KindLocal:
		abs, err := filepath.Abs(r.Path)
		if err == nil && rt.st.Contains(abs) {
			return nil
		}
		if bareName(ref) {
			// "gpt-4" or a misspelt --models-dir name: a model this
			// server does not have, not a path it may not read.
			return notExist{fmt.Errorf("%s: no model of that name; GET /v1/models lists the ones this server serves", ref)}
		}
		return fmt.Errorf("%s: only files inside headroom's store (%s) may be named: %w", ref, rt.st.Root, server.ErrForbidden)
	}
	return fmt.Errorf("%s: the API takes catalog variants, hf: references and store paths, not URLs: %w", ref, server.ErrForbidden)
}

// canonical is the one name of the model ref names: a path is made
// absolute and clean, symbolic links followed (/s//m.gguf, /s/./m.gguf,
// /s/x/../m.gguf and a link to it are one file, one server); a catalog
// variant, a --models-dir name and an hf: reference stay as given.
func (rt *apiRuntime) canonical(ref string) string {
	if _, ok := rt.dir[ref]; ok {
		return ref
	}
	if rt.d.Catalog != nil {
		if e, _, _ := rt.d.Catalog.FindRef(ref); e != nil {
			return ref
		}
	}
	r, err := source.ParseRef(ref)
	if err != nil || r.Kind != source.KindLocal {
		return ref
	}
	abs, err := filepath.Abs(r.Path)
	if err != nil {
		return ref
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	return abs
}

// notExist marks a reference that names nothing, for the API's 404.
type notExist struct{ error }

// bareName reports whether ref is a name rather than a path: no
// directory in it, no extension a model file has.
func bareName(ref string) bool {
	return !strings.ContainsAny(ref, `/\`) && !strings.HasPrefix(ref, ".") && !strings.HasSuffix(strings.ToLower(ref), ".gguf")
}

func (e notExist) Unwrap() []error { return []error{e.error, fs.ErrNotExist} }

// resolve resolves a reference a request may name (checkRef).
func (rt *apiRuntime) resolve(ctx context.Context, ref string) (*launch.Model, error) {
	if path, ok := rt.dir[ref]; ok {
		return rt.d.Resolve(ctx, path)
	}
	if r, ok := rt.settings.refOf(ref); ok && r != ref {
		// A name the settings give (--models-preset): its own model.
		return rt.d.Resolve(ctx, r)
	}
	if err := rt.checkRef(ref); err != nil {
		return nil, err
	}
	return rt.d.Resolve(ctx, ref)
}

// project opens the user's llama.cpp's projection of a model headroom
// does not model, for /api/fit and /api/plan: the llama-fit-params beside
// the llama-server loads use, on a sparse twin of a Hub model's header.
func (rt *apiRuntime) project(ctx context.Context, ref string) (*engine.Projector, func(), error) {
	m, err := rt.resolve(ctx, ref)
	if err != nil {
		return nil, func() {}, err
	}
	return engine.OpenProjector(ctx, rt.d.Client, m.Header, m.ArchErr, rt.d.FitParams)
}

// open resolves a reference for /api/fit and /api/plan.
func (rt *apiRuntime) open(ctx context.Context, ref string) (*arch.Model, error) {
	m, err := rt.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	if m.ArchErr != nil {
		return nil, m.ArchErr
	}
	return m.Arch, nil
}

func (rt *apiRuntime) Load(ctx context.Context, req server.LoadRequest) (*server.Instance, error) {
	if err := rt.checkRef(req.Model); err != nil {
		return nil, err
	}
	if rt.bin == "" {
		return nil, errors.New("llama-server was not found when the API started; restart it with --llama-server")
	}
	o := rt.opts
	if req.Parallel > 0 {
		o.Parallel = req.Parallel
	}
	if req.Ctx > 0 {
		o.Fixed.Ctx = req.Ctx
	}
	// The child must outlive the request that started it. The engine
	// check runs as serve runs it: a load llama.cpp's own projection
	// refuses is refused here too.
	run, err := rt.d.Launch(rt.base, req.Model, launch.Options{Search: o, Store: rt.st, EngineCheck: true,
		Load: launch.LoadOptions{Bin: rt.bin, Ledger: rt.ledger, Records: filepath.Join(rt.st.Root, "runs"), Observations: filepath.Join(rt.st.Root, "observed"), ReadyTimeout: rt.ready}})
	var (
		nf      *launch.NotFit
		refusal *admission.Refusal
	)
	switch {
	case errors.As(err, &nf):
		return nil, &server.Refused{Reason: nf.Error()}
	case errors.As(err, &refusal):
		return nil, &server.Refused{Reason: refusal.Error()}
	case err != nil:
		return nil, err
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	info := server.Instance{ID: run.Ticket.ID, Model: req.Model, State: "ready", URL: run.Server.URL(), Flags: run.Flags,
		Reason: run.Reconciliation.Summary()}
	if rt.runs == nil {
		rt.runs = map[string]*apiInstance{}
	}
	rt.runs[info.ID] = &apiInstance{info: info, run: run}
	return &info, nil
}

func (rt *apiRuntime) Unload(ctx context.Context, id string) error {
	rt.mu.Lock()
	in := rt.runs[id]
	delete(rt.runs, id)
	rt.mu.Unlock()
	if in == nil {
		return fmt.Errorf("%s: %w", id, server.ErrUnknownInstance)
	}
	return in.run.Stop(ctx)
}

func (rt *apiRuntime) Instances() []server.Instance {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := []server.Instance{}
	for _, in := range rt.runs {
		out = append(out, in.info)
	}
	return out
}

// stopAll stops every instance, for the API's shutdown.
func (rt *apiRuntime) stopAll(ctx context.Context) {
	rt.mu.Lock()
	runs := rt.runs
	rt.runs = nil
	rt.mu.Unlock()
	for _, in := range runs {
		in.run.Stop(ctx)
	}
	if rt.pool != nil {
		rt.pool.Close(ctx)
	}
}

// inStore reports whether a catalog variant's files are in the store,
// so /v1/models lists it with what is served without a download.
func (rt *apiRuntime) inStore(variant string) bool {
	if rt.d.Catalog == nil || rt.d.Lock == nil {
		return false
	}
	e, v, err := rt.d.Catalog.Find(variant)
	if err != nil || e == nil {
		return false
	}
	pkg, _ := rt.d.Lock.Lookup(e.ID, *v)
	if pkg == nil || len(pkg.Files) == 0 {
		return false
	}
	var names []string
	for _, f := range pkg.Files {
		names = append(names, f.Name)
	}
	_, ok, err := rt.st.Lookup(pkg.Repo, pkg.Commit, names)
	return err == nil && ok
}
