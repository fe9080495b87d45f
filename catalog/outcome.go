package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/headroom-llm/headroom/builds"
	"strings"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/speed"
)

// Cache keeps byte strings under keys between processes. Recommend keeps
// one entry per program build, machine and search options: the outcome
// of every variant planned for them. A cache that loses an entry only
// costs the time to plan again.
type Cache interface {
	Get(key string) ([]byte, bool)
	Put(key string, data []byte)
}

// outcome is what planning a variant on a machine gave: all of a Row that
// depends on the model and the machine.
type outcome struct {
	Provenance string   `json:"provenance"`
	SizeBytes  int64    `json:"size_bytes"`
	Verdict    string   `json:"verdict"`
	Reason     string   `json:"reason"`
	Plan       *RowPlan `json:"plan,omitempty"`
	Limiting   *Limit   `json:"limiting,omitempty"`
	Speed      *Speed   `json:"speed,omitempty"`
}

func (o outcome) apply(r *Row) {
	r.Provenance, r.SizeBytes = o.Provenance, o.SizeBytes
	r.SizeSource = map[string]string{ProvenanceDerived: "derived", ProvenanceInspected: "hub"}[o.Provenance]
	r.Verdict, r.Reason, r.Plan, r.Limiting, r.Speed = o.Verdict, o.Reason, o.Plan, o.Limiting, o.Speed
	r.Enabled = o.Verdict == plan.Fits
}

// assessModel plans a model as 'headroom plan' would with so and
// estimates the chosen plan's speed. Where nothing fits, the screen's
// closed form names the domain that is short and by about how much.
func assessModel(cm *cachedModel, prov string, mc machine, so plan.SearchOptions) (outcome, error) {
	out := outcome{Provenance: prov, SizeBytes: cm.size}
	if cm.err != nil {
		out.Verdict, out.Reason = plan.Incompatible, strings.TrimPrefix(cm.err.Error(), "incompatible: ")
		return out, nil
	}
	p, err := plan.Search(cm.m, mc.snap, so)
	if err != nil {
		return out, err
	}
	c := p.Chosen
	if c == nil {
		out.Verdict, out.Reason = plan.DoesNotFit, "does not fit: "+strings.Join(p.Explain, "; ")
		out.Limiting = shortest(cm, mc, so)
		return out, nil
	}
	out.Verdict, out.Reason = plan.Fits, "fits"
	if c.Result != nil && c.Result.Reason != "" {
		out.Reason = c.Result.Reason
	}
	out.Plan = &RowPlan{Source: "search", CtxPerSlot: c.CtxPerSlot, Slots: c.Profile.Parallel, GPULayers: c.GPULayers,
		LayersTotal: cm.m.NLayer + 1, CacheType: c.Profile.CacheK, CPUMoE: c.Profile.CPUMoE, Flags: c.Flags}
	if c.Result != nil {
		for _, d := range c.Result.Domains {
			out.Plan.MemoryBytes += d.Required
		}
	}
	out.Speed = estimateSpeed(cm.m, c.Profile, mc)
	return out, nil
}

// shortest names the domain that keeps a model from fitting and by how
// much: the screen's estimate, or, where the screen would have it fit,
// the accounting of the least useful plan (every layer in system memory,
// the minimum context), which is what the search found short.
func shortest(cm *cachedModel, mc machine, so plan.SearchOptions) *Limit {
	if est := screen(cm.c, mc, so.Goal, so.Parallel, so.MinCtx); !est.fits {
		return &Limit{Domain: est.limiting, Shortfall: est.shortfall}
	}
	lim := &Limit{Domain: mc.sysID}
	p := so.Base
	p.Parallel, p.KVUnified, p.Ctx, p.GPULayers = so.Parallel, false, so.MinCtx*so.Parallel, 0
	a, err := plan.Assess(cm.m, nil, p, mc.snap)
	if err != nil {
		return lim
	}
	for _, d := range a.Domains {
		if d.Required == 0 {
			continue
		}
		if short := so.FitTarget - d.Margin; short > lim.Shortfall {
			lim.Domain, lim.Shortfall = d.ID, short
		}
	}
	return lim
}

// estimateSpeed is the speed package's estimate for a profile, one
// sequence at an empty context. Nil when it cannot be placed.
func estimateSpeed(m *arch.Model, p plan.Profile, mc machine) *Speed {
	est := speed.EstimateProfile(m, p, mc.cpu, mc.gpus, mc.snap, 0)
	if len(est) == 0 {
		return nil
	}
	e := est[0]
	return &Speed{DecodeTokensPerSec: e.DecodeTPS, PrefillTokensPerSec: e.PrefillTPS, Calibrated: e.Calibrated,
		ErrorLowPct: e.ErrorLowPct, ErrorHighPct: e.ErrorHighPct}
}

// modelKey names a variant's planner inputs: the locked package, or the
// shape and quantization a header is derived from (entries that share
// both share the key, and so one derivation and one plan).
func (c *Catalog) modelKey(e *Entry, v Variant, lock *LockFile) string {
	if pkg, _ := lock.Lookup(e.ID, v); pkg != nil {
		return "inspected/" + PackageID(pkg.Repo, pkg.Commit, pkg.Files[0].Name)
	}
	shape, err := json.Marshal(e.Shape)
	if err != nil {
		// A shape that does not marshal cannot be shared: key it by entry.
		return "derived/" + e.ID + "/" + v.Quant
	}
	return "derived/" + string(shape) + "/" + v.Quant
}

// cacheKey names the outcomes of one program on one machine with one set
// of search options: the snapshot's memory and devices, not its host name,
// time or notes, which change no plan.
func cacheKey(build string, snap *hw.Snapshot, so plan.SearchOptions) string {
	h := sha256.New()
	fmt.Fprintf(h, "headroom recommend outcomes v2\x00%s\x00", build)
	machine, _ := json.Marshal(struct {
		Domains any
		Devices any
		RPC     any
	}{snap.Domains, snap.Devices, snap.RPC})
	opts, _ := json.Marshal(so)
	r := builds.Default()
	if so.Base.Rules != nil {
		r = *so.Base.Rules
	}
	rules, _ := json.Marshal(r) // not in the profile's JSON
	h.Write(machine)
	h.Write([]byte{0})
	h.Write(opts)
	h.Write([]byte{0})
	h.Write(rules)
	return "recommend-" + hex.EncodeToString(h.Sum(nil))[:32]
}

func loadOutcomes(c Cache, key string) map[string]outcome {
	out := map[string]outcome{}
	if b, ok := c.Get(key); ok {
		if err := json.Unmarshal(b, &out); err != nil {
			return map[string]outcome{} // unreadable: plan again
		}
	}
	return out
}

func saveOutcomes(c Cache, key string, known map[string]outcome) {
	b, err := json.Marshal(known)
	if err != nil {
		return
	}
	c.Put(key, b)
}
