package plan

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan/graph"
)

// Verdicts.
const (
	Fits         = "fits"
	DoesNotFit   = "does_not_fit"
	Incompatible = "incompatible"
)

// Assessment is the answer to "does this profile of this model fit this
// machine": the verdict, the domain that decides it, every domain's
// breakdown and every buffer.
type Assessment struct {
	Verdict  string         `json:"verdict"`
	Reason   string         `json:"reason"`
	Limiting *string        `json:"limiting"`
	Domains  []hw.DomainUse `json:"domains"`
	Buffers  []Buffer       `json:"buffers"`
	Breaches []hw.Breach    `json:"breaches,omitempty"`
	// Fixes are changes to the profile that would make it fit.
	Fixes []Fix `json:"fixes,omitempty"`
	// LoadStaging is memory the load holds for a moment beside every
	// buffer (Result.LoadStaging), counted in the verdict.
	LoadStaging *Buffer `json:"load_staging,omitempty"`
	// Serving is what llama-server holds past the load while it serves
	// (Result.Serving), counted in the verdict.
	Serving []Buffer `json:"serving,omitempty"`
	// Load is the domains' breakdown at load, before serving grows them:
	// the verdict is for the serving peak (Domains), and a profile that
	// fits at load but not while serving says so.
	Load []hw.DomainUse `json:"-"`
	// Warnings are what the verdict does not say: a context beyond the
	// one the model was trained for.
	Warnings []string `json:"warnings,omitempty"`
	// Backends say, for each GPU backend, whether its figures were
	// measured or are estimates.
	Backends []BackendNote `json:"backends,omitempty"`
	// Resolved is the context as llama.cpp would create it.
	Resolved *graph.Context `json:"-"`
}

// Fix is one change that would make a profile fit: the change, typed,
// the llama.cpp flags that make it (for the build the profile is for),
// and what it costs in words.
type Fix struct {
	Change Change   `json:"-"`
	Flags  []string `json:"flags"`
	Says   string   `json:"says"`
}

// Change is what a fix changes in a profile; a nil field or false leaves
// the setting as it is.
type Change struct {
	Ctx, GPULayers, CacheRAM, Checkpoints *int
	NoMmap                                bool
}

// newFix is the fix that makes change c to profile p.
func newFix(p Profile, c Change, says string) Fix {
	return Fix{Change: c, Flags: c.flags(p), Says: says}
}

// Apply returns the profile with the fix's change made.
func (f Fix) Apply(p Profile) (Profile, error) { return f.Change.Apply(p), nil }

// Apply returns p with the change made.
func (c Change) Apply(p Profile) Profile {
	if c.Ctx != nil {
		p.Ctx = *c.Ctx
	}
	if c.GPULayers != nil {
		p.GPULayers = *c.GPULayers
	}
	if c.CacheRAM != nil || c.Checkpoints != nil {
		sv, _ := p.ServingOf()
		if c.CacheRAM != nil {
			sv.CacheRAM = *c.CacheRAM
		}
		if c.Checkpoints != nil {
			sv.Checkpoints = *c.Checkpoints
		}
		p.Serving = &sv
	}
	if c.NoMmap {
		p.Mmap = false
	}
	return p
}

// flags are the llama.cpp flags that make the change to p, written as
// Args writes them for p's build.
func (c Change) flags(p Profile) []string {
	out := []string{}
	if c.Ctx != nil {
		out = append(out, ctxFlag(*c.Ctx)...)
	}
	if c.GPULayers != nil {
		out = append(out, nglFlag(*c.GPULayers)...)
	}
	if c.CacheRAM != nil {
		out = append(out, cacheRAMFlag(*c.CacheRAM)...)
	}
	if c.Checkpoints != nil {
		out = append(out, checkpointsFlag(*c.Checkpoints)...)
	}
	if c.NoMmap {
		out = append(out, noMmapFlag(p.rules())...)
	}
	return out
}

// Devices picks the device views llama.cpp would use on a machine: the CPU
// and the GPUs of one backend, preferring CUDA, ROCm, Metal, then Vulkan,
// since a build with several backends lists one physical GPU under each.
func Devices(s *hw.Snapshot) (Device, []Device) {
	cpu := Device{Name: "CPU", Backend: "CPU"}
	byBackend := map[string][]Device{}
	var rpc []Device
	for _, d := range s.Devices {
		if d.Type == hw.TypeCPU {
			cpu.Features = d.Features
			cpu.Name = d.Name
			continue
		}
		free := d.Total
		if d.Free != nil {
			free = *d.Free
		}
		if free == 0 {
			// A preset gives the domain's size, not the backend's report;
			// llama.cpp's default split follows what the device reports,
			// which is close to that.
			if dom := s.Domain(d.Domain); dom != nil {
				free = dom.Available()
			}
		}
		dev := Device{Name: d.Name, Backend: d.Backend, Free: free, MaxAlloc: d.MaxAlloc, Align: d.Alignment, HostAlign: d.HostAlignment}
		if d.Backend == hw.BackendRPC {
			dev.Endpoint = d.Endpoint
			dev.Buft = "RPC" + strconv.Itoa(d.RemoteIndex) + "[" + d.Endpoint + "]"
			rpc = append(rpc, dev)
			continue
		}
		byBackend[d.Backend] = append(byBackend[d.Backend], dev)
	}
	// llama.cpp puts RPC devices first, in --rpc order, so the last
	// layers and the output stay on this machine.
	for _, b := range []string{"CUDA", "ROCm", "Metal", "Vulkan", "SYCL"} {
		if g := byBackend[b]; len(g) > 0 {
			sort.Slice(g, func(i, j int) bool { return g[i].Name < g[j].Name })
			return cpu, append(rpc, g...)
		}
	}
	return cpu, rpc
}

// chargeKind maps a buffer kind onto the four parts of a domain's breakdown.
func chargeKind(kind BufferKind) string {
	switch kind {
	case KindModel:
		return hw.ChargeModel
	case KindKV, KindRS:
		return hw.ChargeContext
	case KindCompute:
		return hw.ChargeCompute
	}
	return hw.ChargeAuxiliary
}

// Assess accounts the profile on the machine and gives the verdict. An
// architecture headroom cannot model is an Incompatible verdict, not an
// error; errors are for bad profiles and machine files.
func Assess(m *arch.Model, archErr error, p Profile, s *hw.Snapshot) (*Assessment, error) {
	if archErr != nil {
		var inc *arch.Incompatible
		if errors.As(archErr, &inc) {
			return &Assessment{Verdict: Incompatible, Reason: inc.Reason, Domains: []hw.DomainUse{}, Buffers: []Buffer{}}, nil
		}
		return nil, archErr
	}
	if err := p.Check(); err != nil {
		return nil, err
	}
	cpu, gpus := Devices(s)
	a, err := assessOnce(m, p, s, cpu, gpus)
	if err != nil {
		return nil, err
	}
	if c := a.Resolved; c != nil && m.CtxTrain > 0 && c.NCtxSeq > m.CtxTrain {
		a.Warnings = append(a.Warnings, fmt.Sprintf("%d cells per sequence is beyond the %d the model was trained for: llama.cpp warns of a possible training context overflow and answers degrade past it; -c %d keeps every slot within it",
			c.NCtxSeq, m.CtxTrain, m.CtxTrain*c.NSeq))
	}
	if w := embeddingWarning(m, p); w != "" {
		a.Warnings = append(a.Warnings, w)
	}
	if c := a.Resolved; c != nil && (p.FlashAttn == FlashAuto || p.FlashAttn == "") && !c.Flash {
		a.Warnings = append(a.Warnings, fmt.Sprintf("-fa auto turns flash attention off here: a GPU holding layers (CUDA or ROCm) has no flash-attention kernel for a K cache of %s with V of %s at this head size, so the graph holds every head's attention scores (counted above); K and V caches of one type (f16, q8_0 or q4_0) keep it on",
			c.TypeK, c.TypeV))
	}
	if a.Verdict != Fits {
		a.Fixes = fixes(m, p, s, cpu, gpus)
	}
	a.Backends = Backends(gpus)
	return a, nil
}

func assessOnce(m *arch.Model, p Profile, s *hw.Snapshot, cpu Device, gpus []Device) (*Assessment, error) {
	r, err := Account(m, p, cpu, gpus)
	if err != nil {
		return nil, err
	}
	return r.Against(s)
}

// Against judges an accounting against a snapshot's memory. The buffers
// depend only on the model, the profile and the devices, not on what is
// free, so a load can keep the accounting of its preview and judge it
// again against a fresh snapshot.
func (r *Result) Against(s *hw.Snapshot) (*Assessment, error) {
	charges := make([]hw.Charge, 0, len(r.Buffers))
	for _, b := range r.Buffers {
		kind := chargeKind(b.Kind)
		if b.Model != "" {
			kind = hw.ChargeAuxiliary // a projector or draft: auxiliary, whatever the buffer
		}
		charges = append(charges, hw.Charge{Device: b.Device, Kind: kind, Bytes: b.ResidentBytes(), Largest: b.Largest})
	}
	load, err := s.Tally(charges)
	if err != nil {
		return nil, err
	}
	// The serving peak: the load's charges and what the server grows by
	// (the same tally when it grows by nothing).
	t := load
	if len(r.Serving) > 0 {
		for _, b := range r.Serving {
			charges = append(charges, hw.Charge{Device: b.Device, Kind: hw.ChargeServing, Bytes: b.Bytes})
		}
		if t, err = s.Tally(charges); err != nil {
			return nil, err
		}
	}
	a := &Assessment{Domains: t.Domains, Buffers: r.Buffers, Breaches: t.Breaches, Resolved: &r.Context, LoadStaging: r.LoadStaging,
		Serving: r.Serving, Load: load.Domains}
	if t.Limiting != "" {
		lim := t.Limiting
		a.Limiting = &lim
	}
	var use *hw.DomainUse
	for i := range t.Domains {
		if t.Domains[i].ID == t.Limiting {
			use = &t.Domains[i]
		}
	}
	if load.Fits && r.LoadStaging != nil {
		// What stays resident fits; the load's read buffer comes on top
		// of it for a moment.
		if d, err := s.DomainOf(r.LoadStaging.Device); err == nil {
			for i := range load.Domains {
				if u := &load.Domains[i]; u.ID == d.ID && u.Margin < r.LoadStaging.Bytes {
					a.Verdict = DoesNotFit
					a.Reason = fmt.Sprintf("does not fit while loading: %s keeps %s once loaded, but without mmap the load reads each repacked weight through a buffer of its size (%s for the largest), %s more than %s has",
						u.ID, mib(u.Required), mib(r.LoadStaging.Bytes), mib(r.LoadStaging.Bytes-u.Margin), mib(u.Available))
					lim := u.ID
					a.Limiting = &lim
					return a, nil
				}
			}
		}
	}
	switch {
	case t.Fits:
		a.Verdict = Fits
		if use != nil {
			a.Reason = fmt.Sprintf("fits: the tightest domain, %s, needs %s of %s, leaving %s", use.ID, mib(use.Required), mib(use.Available), mib(use.Margin))
		} else {
			a.Reason = "fits"
		}
	case use != nil && use.Margin < 0 && load.Fits && use.Serving > 0:
		a.Verdict = DoesNotFit
		a.Reason = fmt.Sprintf("does not fit while serving: %s holds %s once loaded, and llama-server grows by %s while it serves (%s), to %s of %s, short by %s",
			use.ID, mib(use.Required-use.Serving), mib(use.Serving), servingWords(r.Serving), mib(use.Required), mib(use.Available), mib(-use.Margin))
	case use != nil && use.Margin < 0:
		a.Verdict = DoesNotFit
		a.Reason = fmt.Sprintf("does not fit: %s needs %s but has %s, short by %s", use.ID, mib(use.Required), mib(use.Available), mib(-use.Margin))
		// A tensor over a device's binding limit fails the load whatever
		// the memory; say so too.
		for _, b := range t.Breaches {
			if b.Limit == "max_alloc" {
				a.Reason += "; " + describeBreach(b)
			}
		}
	default:
		a.Verdict = DoesNotFit
		var parts []string
		for _, b := range t.Breaches {
			parts = append(parts, describeBreach(b))
		}
		a.Reason = "does not fit: " + strings.Join(parts, "; ")
	}
	return a, nil
}

// describeBreach says how a device-local limit is exceeded. Over the
// binding limit (max_alloc) it is a single tensor, which llama.cpp cannot
// place on the device at all ("pre-allocated tensor ... in a buffer ...
// that cannot run the operation"): the load aborts.
func describeBreach(b hw.Breach) string {
	if b.Limit == "max_alloc" {
		return fmt.Sprintf("%s: a %s tensor over its max alloc limit of %s (llama.cpp aborts the load)", b.Device, mib(b.Bytes), mib(b.Allowed))
	}
	return fmt.Sprintf("%s: %s over its %s limit of %s", b.Device, mib(b.Bytes), strings.ReplaceAll(b.Limit, "_", " "), mib(b.Allowed))
}

// fixes searches for the nearest profiles that fit: the largest context
// (a multiple of 256, as llama.cpp's fit rounds) and, with GPUs, the most
// layers that fit at the requested context.
func fixes(m *arch.Model, p Profile, s *hw.Snapshot, cpu Device, gpus []Device) []Fix {
	var out []Fix
	fitsWith := func(q Profile) bool {
		a, err := assessOnce(m, q, s, cpu, gpus)
		return err == nil && a.Verdict == Fits
	}
	out = append(out, servingFixes(p, fitsWith)...)
	ctx := p.Ctx
	if ctx == 0 {
		ctx = m.CtxTrain
	}
	// A smaller context is offered only within what the model was
	// trained for, per slot.
	hi := ctx / 256
	if m.CtxTrain > 0 {
		hi = min(hi, m.CtxTrain*max(p.Parallel, 1)/256)
	}
	lo := 0 // in units of 256 cells
	for lo < hi {
		mid := (lo + hi + 1) / 2
		q := p
		q.Ctx = mid * 256
		if fitsWith(q) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo > 0 {
		n := lo * 256
		out = append(out, newFix(p, Change{Ctx: &n}, fmt.Sprintf("a context of %d cells instead of %d fits", n, ctx)))
	}
	if len(gpus) > 0 {
		n := p.GPULayers
		if n < 0 {
			n = m.NLayer + 1
		}
		// Fewer layers on the GPU never need more GPU memory, so the
		// largest count that fits is found by bisection.
		lo, hi := -1, n-1
		for lo < hi {
			mid := (lo + hi + 1) / 2
			q := p
			q.GPULayers = mid
			if fitsWith(q) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		if lo >= 0 {
			n := lo
			out = append(out, newFix(p, Change{GPULayers: &n}, fmt.Sprintf("%d of %d layers on the GPU, the rest in system memory, fits at this context", n, m.NLayer+1)))
		}
	}
	if p.Mmap {
		// Loading the weights instead of mapping the file keeps less
		// resident where the mapped span holds more than the weights
		// used from it (Metal wires the whole span).
		q := p
		q.Mmap = false
		if fitsWith(q) {
			out = append(out, newFix(p, Change{NoMmap: true}, "loading the weights instead of mapping the file fits: less of the file stays resident (a slower load)"))
		}
	}
	if len(out) == 0 {
		out = append(out, Fix{Flags: []string{}, Says: "no context or layer split fits: choose a smaller quantization or a smaller model"})
	}
	return out
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

// marginIn is domain id's margin in an assessment; a domain it does not
// list carries nothing, so nothing there is short.
func marginIn(a *Assessment, id string) int64 {
	for _, d := range a.Domains {
		if d.ID == id {
			return d.Margin
		}
	}
	return 1 << 62
}
