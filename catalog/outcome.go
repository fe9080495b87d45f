package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/headroom-llm/headroom/builds"
	"math"
	"slices"
	"strings"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/speed"
)

// Cache keeps byte strings under keys between processes. Recommend keeps
// one entry per program build, catalog, machine capacity and search
// options: the outcome of every variant planned for them. A cache that
// loses an entry only costs the time to plan again.
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
	// Needs is what a fitting plan takes from each memory domain, so that
	// a later run can judge it against the memory free then without
	// planning again.
	Needs []need `json:"needs,omitempty"`
}

// need is one domain's share of a plan.
type need struct {
	Domain string `json:"domain"`
	Bytes  int64  `json:"bytes"`
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
	if c.Result != nil {
		for _, d := range c.Result.Domains {
			if d.Required > 0 {
				out.Needs = append(out.Needs, need{d.ID, d.Required})
			}
		}
	}
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
	est := mc.cal.EstimateProfile(m, p, mc.cpu, mc.gpus, mc.snap, 0)
	if len(est) == 0 {
		return nil
	}
	e := est[0]
	return &Speed{DecodeTokensPerSec: e.DecodeTPS, PrefillTokensPerSec: e.PrefillTPS, Calibrated: e.Calibrated,
		ErrorLowPct: e.ErrorLowPct, ErrorHighPct: e.ErrorHighPct, CalibratedOn: e.CalibratedOn}
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

// cacheKey names the outcomes of one program and catalog on one machine
// with one set of search options. The machine is its capacity: every
// domain's and device's size and kind, not what was free at the moment
// (free memory, processes, the desktop's share), nor its host name, time
// or notes; a run judges the kept plans against the memory free then
// (recheck).
func cacheKey(build string, catalog [32]byte, snap *hw.Snapshot, so plan.SearchOptions, cal *speed.Calibration) string {
	h := sha256.New()
	fmt.Fprintf(h, "headroom recommend outcomes v3\x00%s\x00%x\x00", build, catalog)
	machine, _ := json.Marshal(capacityOf(snap))
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
	if cal != nil {
		// The outcomes carry speed estimates: a new calibration is a
		// new answer.
		c, _ := json.Marshal(cal)
		h.Write([]byte{0})
		h.Write(c)
	}
	return "recommend-" + hex.EncodeToString(h.Sum(nil))[:32]
}

// capacityOf is the part of a snapshot that stays while programs start
// and stop: the snapshot without its free figures, other processes and
// the desktop's reservation.
func capacityOf(snap *hw.Snapshot) any {
	doms := slices.Clone(snap.Domains)
	for i := range doms {
		doms[i].Free, doms[i].Reserved = nil, 0
	}
	devs := slices.Clone(snap.Devices)
	for i := range devs {
		devs[i].Free, devs[i].Processes = nil, nil
	}
	return struct {
		Domains []hw.Domain
		Devices []hw.Device
		RPC     []string
	}{doms, devs, snap.RPC}
}

// kept is a cache entry: the outcomes, and what each domain had free when
// they were planned.
type kept struct {
	Planned  map[string]int64   `json:"planned_available"`
	Outcomes map[string]outcome `json:"outcomes"`
}

// replanRise is how much more memory a domain must have free than when
// the kept plans were made before they are made again: more room makes
// larger plans, while a few MiB either way would only move rows between
// runs.
const replanRise = 1 << 30

// availableOf is what every domain of snap can give now.
func availableOf(snap *hw.Snapshot) map[string]int64 {
	m := make(map[string]int64, len(snap.Domains))
	for i := range snap.Domains {
		m[snap.Domains[i].ID] = snap.Domains[i].Available()
	}
	return m
}

// loadKept returns the kept outcomes for key, or none when there are none,
// they cannot be read, or some domain has replanRise more free now than
// when they were planned.
func loadKept(c Cache, key string, now map[string]int64) kept {
	fresh := kept{Planned: now, Outcomes: map[string]outcome{}}
	b, ok := c.Get(key)
	if !ok {
		return fresh
	}
	var k kept
	if err := json.Unmarshal(b, &k); err != nil || k.Outcomes == nil {
		return fresh // unreadable: plan again
	}
	for id, avail := range now {
		was, ok := k.Planned[id]
		if !ok || avail > was+replanRise {
			return fresh
		}
	}
	return k
}

func saveKept(c Cache, key string, k kept) {
	b, err := json.Marshal(k)
	if err != nil {
		return
	}
	c.Put(key, b)
}

// plausible refuses a kept outcome no plan could have given, so an edited
// or damaged cache is planned again rather than believed: a verdict it
// does not know, a size or need below zero or not finite, and for a plan
// that fits, needs that do not add up to its memory or that hold less
// than half the model's bytes (every weight is resident in some domain,
// mapped ones in RAM's page cache), and speeds that are not finite and
// positive. size is the model's size where the lock knows it (0 where
// it does not), which the outcome must give.
func (o outcome) plausible(size int64) error {
	switch o.Verdict {
	case plan.Fits, plan.DoesNotFit, plan.Incompatible:
	default:
		return fmt.Errorf("verdict %q", o.Verdict)
	}
	if o.SizeBytes < 0 || size > 0 && o.SizeBytes != size {
		return fmt.Errorf("size %d bytes, the model has %d", o.SizeBytes, size)
	}
	if o.Verdict != plan.Fits {
		return nil
	}
	var sum int64
	for _, n := range o.Needs {
		if n.Bytes < 0 {
			return fmt.Errorf("%s needs %d bytes", n.Domain, n.Bytes)
		}
		sum += n.Bytes
	}
	switch {
	case o.Plan == nil || len(o.Needs) == 0:
		return errors.New("a plan that fits without its plan or needs")
	case o.Plan.MemoryBytes != sum:
		return fmt.Errorf("needs add up to %d bytes, the plan holds %d", sum, o.Plan.MemoryBytes)
	case sum < o.SizeBytes/2:
		return fmt.Errorf("needs of %d bytes for a model of %d", sum, o.SizeBytes)
	}
	if sp := o.Speed; sp != nil {
		for _, v := range []*float64{sp.DecodeTokensPerSec, sp.PrefillTokensPerSec} {
			if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0) || *v <= 0) {
				return fmt.Errorf("a speed of %v tokens/s", *v)
			}
		}
		if math.IsNaN(sp.ErrorLowPct) || math.IsInf(sp.ErrorLowPct, 0) || math.IsNaN(sp.ErrorHighPct) || math.IsInf(sp.ErrorHighPct, 0) {
			return errors.New("an error bound that is not finite")
		}
	}
	return nil
}

// recheck judges a fitting outcome's plan against the memory free now:
// a plan that needs more of a domain than it has no longer fits, with the
// shortfall, and a plan that fits says how much it leaves now. Verdicts
// other than fits are kept as planned.
func (o outcome) recheck(now map[string]int64) outcome {
	if o.Verdict != plan.Fits || len(o.Needs) == 0 {
		return o
	}
	var tight, short *need
	var tightMargin, shortBy int64
	for i := range o.Needs {
		n := &o.Needs[i]
		margin := now[n.Domain] - n.Bytes
		if tight == nil || margin < tightMargin {
			tight, tightMargin = n, margin
		}
		if margin < 0 && -margin > shortBy {
			short, shortBy = n, -margin
		}
	}
	if short != nil {
		o.Verdict = plan.DoesNotFit
		o.Reason = fmt.Sprintf("does not fit now: the plan needs %s of %s, which has %s free now, short by %s",
			mibs(short.Bytes), short.Domain, mibs(now[short.Domain]), mibs(shortBy))
		o.Limiting = &Limit{Domain: short.Domain, Shortfall: shortBy}
		return o
	}
	o.Reason = fmt.Sprintf("fits: the tightest domain, %s, needs %s of %s free now, leaving %s",
		tight.Domain, mibs(tight.Bytes), mibs(now[tight.Domain]), mibs(tightMargin))
	return o
}

func mibs(b int64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }
