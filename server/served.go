package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

// withServed gives each listed model the pool's state for it, and lists
// the models the pool serves that the catalog does not (a directory's
// files, hf: references and store files a request named), each planned
// on snap: one that does not fit is listed disabled, with the reason.
func (s *server) withServed(ctx context.Context, data []modelObject, snap *hw.Snapshot) []modelObject {
	at := map[string]int{}
	for i, mo := range data {
		at[mo.ID] = i
	}
	for _, pm := range s.cfg.Pool.Models() {
		if i, ok := at[pm.Name]; ok {
			if data[i].Status == "available" || pm.State != StateUnloaded {
				data[i].State = pm.State
			}
			continue
		}
		mo := modelObject{ID: pm.Name, Object: "model", OwnedBy: "headroom", Name: pm.Name, Ref: pm.Ref, Status: "available", State: pm.State}
		if pm.State == StateUnloaded {
			// Judged for this machine: a listing for a preset
			// (?machine=) is judged apart from this machine's.
			key := mo.ID + "\x00" + snap.Preset + "\x00" + snap.Host
			s.judged.judge(key, &mo, func(mo *modelObject) { s.judge(ctx, mo, pm.Ref, pm.Search, snap) })
		} else {
			mo.Verdict = plan.Fits
		}
		data = append(data, mo)
	}
	return data
}

// judge plans a model outside the catalog on snap, as /api/plan does,
// and marks it disabled when no plan fits or it cannot be planned.
func (s *server) judge(ctx context.Context, mo *modelObject, ref string, search *plan.SearchOptions, snap *hw.Snapshot) {
	disable := func(why, reason string) {
		mo.Status, mo.State, mo.DisabledReason, mo.Reason = "disabled", "disabled", why, reason
	}
	res, err := s.model(ctx, mo.ID)
	switch {
	case err != nil:
		disable(disabledIncompatible, err.Error())
		return
	case res.archErr != nil:
		// llama.cpp may still project it when it is loaded; the listing
		// says what headroom cannot tell.
		mo.Verdict, mo.Reason = plan.Incompatible, "headroom cannot model this architecture: "+res.archErr.Error()
		return
	}
	o := plan.DefaultSearch()
	switch {
	case search != nil:
		o = *search // its own settings
	case s.cfg.Search != nil:
		o = *s.cfg.Search // as the runtime will load it
	}
	o.Base.Rules = s.cfg.Rules
	p, err := plan.Search(res.m, snap, o)
	switch {
	case err != nil:
		disable(disabledIncompatible, fmt.Sprintf("planning %s: %v", mo.ID, err))
	case p.Chosen == nil:
		mo.Verdict = plan.DoesNotFit
		disable(disabledResources, strings.Join(p.Explain, "; "))
	default:
		mo.Verdict, mo.Reason = plan.Fits, fmt.Sprintf("fits: %d slot(s) of %d tokens", p.Chosen.Profile.Parallel, p.Chosen.CtxPerSlot)
	}
}

// judgeTTL is how long a model's judgement stands in /v1/models: long
// enough that a client polling the list does not open every header (and
// ask the Hub) each time, short enough to follow the machine.
const judgeTTL = 30 * time.Second

// judgement is one model's listing as judged, and when.
type judgement struct {
	at time.Time
	mo modelObject
}

// judgements are the judged listings of the models outside the catalog,
// by name and machine.
type judgements struct {
	mu sync.Mutex
	at map[string]judgement
}

// judge fills mo from a judgement under key (a model on a machine)
// younger than judgeTTL, else judges it with fresh and keeps the result. Old judgements are dropped as new
// ones are made, so the map holds no more than the pool lists.
func (j *judgements) judge(key string, mo *modelObject, fresh func(*modelObject)) {
	j.mu.Lock()
	if k, ok := j.at[key]; ok && time.Since(k.at) < judgeTTL {
		j.mu.Unlock()
		state := mo.State
		*mo = k.mo
		if mo.Status != "disabled" {
			mo.State = state
		}
		return
	}
	j.mu.Unlock()
	fresh(mo)
	j.mu.Lock()
	defer j.mu.Unlock()
	for n, k := range j.at {
		if time.Since(k.at) >= judgeTTL {
			delete(j.at, n)
		}
	}
	j.at[key] = judgement{at: time.Now(), mo: *mo}
}

// servedInstances are the pool's models that hold or are getting memory,
// as /api/instances lists them.
func (s *server) servedInstances() []Instance {
	var out []Instance
	for _, pm := range s.cfg.Pool.Models() {
		if pm.State == StateUnloaded {
			continue
		}
		in := Instance{Model: pm.Name, State: pm.State, InFlight: pm.InFlight, Waiting: pm.Waiting, Pinned: pm.Pinned, Served: true,
			Aliases: pm.Aliases, Source: pm.Source, Settings: pm.Flags, Stale: pm.Stale}
		if pm.State == StateLoading {
			pr := pm.Progress
			in.Progress = &pr
		}
		if !pm.LastUsed.IsZero() {
			t := pm.LastUsed.UTC().Truncate(time.Millisecond)
			in.LastUsed = &t
		}
		if c := pm.Child; c != nil {
			b := c.Booking()
			in.ID, in.URL, in.Flags, in.Memory = b.ID, c.URL(), c.Flags(), b.Need
		}
		out = append(out, in)
	}
	return out
}

// instancesJSON is /api/instances: what runs, and what the provider
// loaded, stopped and refused.
type instancesJSON struct {
	// Provider says the OpenAI-compatible endpoints serve models here
	// (/models/load, the panel's Load button); false on a server
	// without a runtime.
	Provider  bool       `json:"provider"`
	Instances []Instance `json:"instances"`
	Events    []Event    `json:"events"`
}

func (s *server) instances(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	out := instancesJSON{Instances: []Instance{}, Events: []Event{}}
	if s.cfg.Runtime != nil {
		out.Instances = append(out.Instances, s.cfg.Runtime.Instances()...)
	}
	if s.cfg.Pool != nil {
		out.Provider = true
		out.Instances = append(out.Instances, s.servedInstances()...)
		out.Events = append(out.Events, s.cfg.Pool.Events()...)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
