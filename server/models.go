package server

import (
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/units"
	"github.com/headroom-llm/headroom/plan"
)

// Why a listed model is disabled, in /v1/models' disabled_reason.
const (
	disabledResources    = "insufficient_resources"
	disabledIncompatible = "incompatible"
	disabledFiltered     = "filtered"
)

// modelObject is one entry of /v1/models: OpenAI's model object, plus
// whether this machine can run it and why not.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	Name    string `json:"name"`
	Ref     string `json:"ref"`
	Status  string `json:"status"` // available or disabled
	// State is where the provider has it: loaded, loading, stopping,
	// unloaded, or disabled (as Status says).
	State          string `json:"state"`
	Verdict        string `json:"verdict"`
	Rank           int    `json:"rank,omitempty"`
	DisabledReason string `json:"disabled_reason,omitempty"`
	Reason         string `json:"reason"`
	// Remote says a catalog variant must be downloaded before it is
	// served; DownloadBytes is how much.
	Remote        bool  `json:"remote,omitempty"`
	DownloadBytes int64 `json:"download_bytes,omitempty"`
}

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

// models lists every catalog variant, best first: clients that only know
// OpenAI's listing see them all, and the ones that read status can grey out
// those this machine cannot run, with the reason.
func (s *server) models(w http.ResponseWriter, r *http.Request) error {
	m, err := s.machineOnly(r)
	if err != nil {
		return err
	}
	o := catalog.DefaultOptions()
	o.Cache, o.Build, o.Rules, o.Calibration = &s.plans, "this server", s.cfg.Rules, s.calibration(m.snap)
	rows, err := catalog.Recommend(s.cfg.Catalog, s.cfg.Lock, m.snap, o)
	if err != nil {
		return fmt.Errorf("ranking the catalog: %w", err)
	}
	list := listModels(s.cfg.Catalog, rows, m.snap, o)
	s.markRemote(list.Data, rows)
	if s.cfg.Pool != nil {
		list.Data = s.withServed(r.Context(), list.Data, m.snap)
	}
	list.Data = servableFirst(list.Data, s.cfg.HideRemote)
	writeJSON(w, http.StatusOK, list)
	return nil
}

// markRemote marks the catalog variants that are not in the store, with
// what they would download. Without Config.Local every variant is.
func (s *server) markRemote(data []modelObject, rows []catalog.Row) {
	size := map[string]int64{}
	for _, row := range rows {
		size[catalog.VariantKey(row.Entry, row.Quant)] = row.SizeBytes
	}
	for i := range data {
		mo := &data[i]
		if s.cfg.Local != nil && s.cfg.Local(mo.ID) {
			continue
		}
		mo.Remote, mo.DownloadBytes = true, size[mo.ID]
		if mo.DownloadBytes == 0 {
			mo.DownloadBytes = s.sizes.of(mo.ID, s.cfg.Catalog, s.cfg.Lock)
		}
	}
}

// servableFirst orders a listing by what a request gets soonest: the
// models loaded (or loading), then those that load without a download
// (a directory's files, the store's, a presets file's), then the
// catalog's to download, then the disabled ones; the catalog's rank
// within each. hideRemote leaves out the ones to download.
func servableFirst(data []modelObject, hideRemote bool) []modelObject {
	group := func(mo modelObject) int {
		switch {
		case mo.Status == "disabled":
			return 3
		case mo.State != StateUnloaded:
			return 0
		case !mo.Remote:
			return 1
		}
		return 2
	}
	out := data[:0]
	for _, mo := range data {
		if !(hideRemote && mo.Remote && (mo.State == StateUnloaded || mo.Status == "disabled")) {
			out = append(out, mo)
		}
	}
	slices.SortStableFunc(out, func(a, b modelObject) int { return group(a) - group(b) })
	return out
}

// listModels turns recommendation rows into the listing. A variant the
// recommendation left out (trained on less context than o asks) is still
// listed, disabled, so that every variant appears exactly once.
func listModels(cat *catalog.Catalog, rows []catalog.Row, snap *hw.Snapshot, o catalog.Options) modelList {
	out := modelList{Object: "list", Data: []modelObject{}}
	seen := map[string]bool{}
	for _, row := range rows {
		id := catalog.VariantKey(row.Entry, row.Quant)
		if seen[id] {
			continue
		}
		seen[id] = true
		mo := modelObject{ID: id, Object: "model", OwnedBy: "headroom", Name: row.Name, Ref: row.Ref,
			Verdict: row.Verdict, Rank: row.Rank, Reason: row.Reason}
		switch {
		case row.Enabled:
			mo.Status, mo.State = "available", StateUnloaded
		case row.Verdict == plan.Incompatible:
			mo.Status, mo.State, mo.DisabledReason = "disabled", "disabled", disabledIncompatible
			mo.Reason = "headroom cannot model this architecture: " + row.Reason
		default:
			mo.Status, mo.State, mo.DisabledReason = "disabled", "disabled", disabledResources
			mo.Reason = shortOf(row, snap, o)
		}
		out.Data = append(out.Data, mo)
	}
	for _, e := range cat.Entries {
		for _, v := range e.Variants {
			id := catalog.VariantKey(e.ID, v.Quant)
			if seen[id] {
				continue
			}
			seen[id] = true
			out.Data = append(out.Data, modelObject{ID: id, Object: "model", OwnedBy: "headroom", Name: e.Name, Ref: v.Ref,
				Status: "disabled", State: "disabled", DisabledReason: disabledFiltered,
				Reason: fmt.Sprintf("trained on %d tokens of context, less than the %d per conversation headroom asks for", e.CtxTrained, o.MinCtx)})
		}
	}
	return out
}

// shortOf says which memory domain keeps a row from fitting, and by how
// much, for the least useful configuration (one conversation of the
// minimum context).
func shortOf(row catalog.Row, snap *hw.Snapshot, o catalog.Options) string {
	if row.Limiting == nil || row.Limiting.Shortfall <= 0 {
		return row.Reason
	}
	convs := "one conversation"
	if o.Parallel > 1 {
		convs = fmt.Sprintf("%d conversations", o.Parallel)
	}
	return fmt.Sprintf("does not fit: %s is short by %s, even for %s of %d tokens",
		domainName(snap, row.Limiting.Domain), units.GiB(row.Limiting.Shortfall), convs, o.MinCtx)
}

// variantSizes keeps the download size of each catalog variant the
// ranking leaves out (an encoder, a filtered one): the catalog does not
// change while the server runs, and building a variant's model for its
// size at every listing would repeat the same work.
type variantSizes struct {
	mu   sync.Mutex
	size map[string]int64
}

func (v *variantSizes) of(id string, cat *catalog.Catalog, lock *catalog.LockFile) int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	if n, ok := v.size[id]; ok {
		return n
	}
	var n int64
	if e, va, err := cat.Find(id); err == nil && e != nil {
		_, _, n, _ = cat.Model(e, *va, lock)
	}
	if v.size == nil {
		v.size = map[string]int64{}
	}
	v.size[id] = n
	return n
}
