// Package server is headroom's local HTTP API and web panel.
//
// The API answers the questions the CLI answers, in the same JSON shapes as
// its --json output: the machine (/api/hw; /api/presets lists the machines
// a request may name instead of this one), whether a model fits
// (/api/fit), how to run it (/api/plan) and what to run (/api/recommend).
// /v1/models lists every catalog variant the way OpenAI-compatible clients
// expect, with the ones this machine cannot run present but disabled, so
// that a client can show why rather than hide them. /api/load, /api/unload
// and /api/instances drive a Runtime, which admits a model before it starts
// it. The panel at / draws the same answers as bars per memory domain.
//
// A request never names a file: machines are presets or this machine, and
// models are catalog variants or whatever Config.Open accepts.
package server

import (
	"context"
	"errors"
	"fmt"
	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/plan"
	"net/http"
	"strings"
	"time"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/speed"
)

// Config is what the server answers from.
type Config struct {
	// Machine takes a fresh snapshot of this machine. It is called once for
	// each request that names no preset, so it should be cheap enough for
	// that (a caller may cache a probe). Required.
	Machine func(ctx context.Context) (*hw.Snapshot, error)
	// Catalog and Lock are the curated variants and their pinned
	// artifacts; nil means the ones built into headroom.
	Catalog *catalog.Catalog
	Lock    *catalog.LockFile
	// Open resolves a model that is not a catalog variant (an hf: reference,
	// a path in headroom's store) to its planner model. An error wrapping
	// fs.ErrNotExist answers 404, one for which arch.IsIncompatible holds is
	// assessed as an incompatible verdict, any other answers 400. Nil means
	// only catalog variants are known.
	Open func(ctx context.Context, ref string) (*arch.Model, error)
	// Project, where set, answers for a model Open found to be of an
	// architecture headroom does not model: the user's llama.cpp that
	// projects its loads (engine.OpenProjector) and what to remove when
	// done. An *arch.Incompatible error says why it cannot be projected;
	// nil Project leaves such a model incompatible.
	Project func(ctx context.Context, ref string) (*engine.Projector, func(), error)
	// Runtime loads and unloads models; nil means /api/load and
	// /api/unload answer 501.
	Runtime Runtime
	// Pool serves the OpenAI-compatible endpoints (/v1/chat/completions,
	// /v1/completions, /v1/embeddings), loading models on demand; nil
	// means they answer 501.
	Pool *Pool
	// MaxOpens bounds how many models Open reads at once (each read may
	// take the header budget, 256 MiB); DefaultMaxOpens when 0. Results
	// are kept by reference for a while, so a model asked for again is
	// not read again.
	MaxOpens int
	// Token, when set, is required of every API request as
	// "Authorization: Bearer TOKEN", and the Host header may then name any
	// address: set it when the server listens beyond loopback. Empty
	// means loopback only: Host must name 127.0.0.1, localhost or [::1].
	Token string
	// Rules are the llama.cpp build's the plans follow (engine.Note: the
	// build that loads models, else the newest one headroom measured).
	Rules *builds.Rules
	// Calibration, where set, gives a machine's own fitted speed
	// parameters (headroom bench) for a snapshot, nil for none; nil
	// Calibration estimates every machine with the published fits and
	// priors.
	Calibration func(*hw.Snapshot) *speed.Calibration
	// WriteStall bounds each write of a forwarded answer: a client that
	// stops reading a stream loses it after this long instead of holding
	// its model in flight. DefaultWriteStall when 0.
	WriteStall time.Duration
	// Search is what the runtime plans each load with (serve-api's -np,
	// -c, ...): /v1/models judges the models the pool serves with it, so
	// a model listed available is one that loads. nil is the default
	// search.
	Search *plan.SearchOptions
	// Local reports whether a catalog variant is in the store, so that
	// /v1/models lists it with what can be served without a download;
	// nil counts every variant as remote.
	Local func(variant string) bool
	// HideRemote leaves the catalog variants that must be downloaded
	// out of /v1/models (they are still served when named).
	HideRemote bool
}

// calibration is the machine's own speed calibration, nil for none.
func (s *server) calibration(snap *hw.Snapshot) *speed.Calibration {
	if s.cfg.Calibration == nil {
		return nil
	}
	return s.cfg.Calibration(snap)
}

// server holds the configuration; it is read-only after New, so handlers
// share it without locks.
type server struct {
	cfg    Config
	opener *opener // nil when Config.Open is
	// plans keeps the catalog's per-variant plans between requests: a
	// plan depends only on the machine and the search options, which are
	// in its key, so a panel that reloads, or two pages asking at once,
	// plan each variant once instead of every time. The bound is a few
	// machines' worth of catalog plans.
	plans catalog.MemoryCache
	// upstream forwards OpenAI-compatible requests to the children.
	upstream *http.Client
	// judged keeps /v1/models' judgement of each model outside the
	// catalog for judgeTTL: listing it again neither opens its header nor
	// asks the Hub.
	judged *judgements
	// sizes are the download sizes /v1/models gives variants the
	// ranking left out.
	sizes *variantSizes
}

// New returns the API and panel as one handler.
func New(cfg Config) (http.Handler, error) {
	if cfg.Machine == nil {
		return nil, errors.New("server: Config.Machine is nil; the server needs a way to snapshot this machine")
	}
	if cfg.Catalog == nil {
		c, err := catalog.Load()
		if err != nil {
			return nil, fmt.Errorf("server: loading the built-in catalog: %w", err)
		}
		cfg.Catalog = c
	}
	if cfg.Lock == nil {
		l, err := catalog.LoadLock()
		if err != nil {
			return nil, fmt.Errorf("server: loading the built-in lock: %w", err)
		}
		cfg.Lock = l
	}
	s := &server{cfg: cfg, plans: catalog.MemoryCache{Max: 4096}, upstream: newUpstream(), judged: &judgements{at: map[string]judgement{}}, sizes: &variantSizes{}}
	if cfg.Open != nil {
		s.opener = newOpener(cfg.Open, cfg.MaxOpens)
	}
	panel, err := panelHandler()
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/api/hw", route(http.MethodGet, s.hw))
	mux.Handle("/api/presets", route(http.MethodGet, s.presets))
	mux.Handle("/api/fit", route(http.MethodGet, s.fit))
	mux.Handle("/api/plan", route(http.MethodGet, s.plan))
	mux.Handle("/api/recommend", route(http.MethodGet, s.recommend))
	mux.Handle("/api/instances", route(http.MethodGet, s.instances))
	mux.Handle("/api/load", route(http.MethodPost, s.load))
	mux.Handle("/api/unload", route(http.MethodPost, s.unload))
	mux.Handle("/metrics", route(http.MethodGet, s.metrics))
	mux.Handle("/api/pin", route(http.MethodPost, s.pin(true)))
	mux.Handle("/api/unpin", route(http.MethodPost, s.pin(false)))
	mux.Handle("/models/load", route(http.MethodPost, s.modelsLoad))
	mux.Handle("/models/unload", route(http.MethodPost, s.modelsUnload))
	mux.Handle("/v1/models", route(http.MethodGet, s.models))
	for _, p := range openAIPaths {
		mux.Handle(p, route(http.MethodPost, s.openAI(p)))
	}
	// Anything else under the API prefixes is a JSON 404, not the panel.
	for _, prefix := range []string{"/api/", "/v1/", "/models/"} {
		mux.Handle(prefix, handlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			return notFound("no endpoint %s %s; see the package documentation for the API", r.Method, r.URL.Path)
		}))
	}
	mux.Handle("/", panel)
	return s.guard(mux), nil
}

// handlerFunc is a handler that returns its failure; serving writes it as
// the API's JSON error.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (h handlerFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h(w, r); err != nil {
		writeError(w, r, err)
	}
}

// route accepts one method (GET also answers HEAD, as net/http does) and
// answers any other with 405 and the Allow header. Every route that is not
// GET changes state, and takes application/json only (see guard).
func route(method string, h handlerFunc) http.Handler {
	allow := method
	if method == http.MethodGet {
		allow = "GET, HEAD"
	}
	return handlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			w.Header().Set("Allow", allow)
			return &apiError{status: http.StatusMethodNotAllowed,
				msg: fmt.Sprintf("%s %s: want %s, got %s", r.Method, r.URL.Path, strings.ReplaceAll(allow, ", ", " or "), r.Method)}
		}
		if method != http.MethodGet {
			if err := checkJSON(r); err != nil {
				return err
			}
		}
		return h(w, r)
	})
}
