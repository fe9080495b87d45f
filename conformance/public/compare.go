package public

import (
	"fmt"
	"github.com/headroom-llm/headroom/builds"
	"math"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/synth"
)

// Status is how one buffer group of a case compares.
type Status string

// The statuses a compared group can have.
const (
	// Equal: a weights, KV, recurrent or output group whose planned
	// bytes print as llama.cpp printed them.
	Equal Status = "equal"
	// Within: a compute group inside engine.ComputeWithin's bounds.
	Within Status = "within"
	// Miss: outside its bounds, or logged and not planned, or (in a
	// complete case) planned and not logged.
	Miss Status = "miss"
	// QuantUnknown: a weights group of a file whose quant mix the log
	// does not show; its error is shown but not held to exactness.
	QuantUnknown Status = "quant mix unknown"
	// SplitUnknown: a mapped weights group of a model in several files
	// (Model.SplitFiles) whose split points the log does not show:
	// llama.cpp maps each file's span apart (as headroom does for the
	// shards of a real split model), while the comparison plans synth's
	// single file. Its error is shown but not held to exactness.
	SplitUnknown Status = "split unknown"
	// NotInExcerpt: planned, while the case's lines are only part of
	// the log, so its absence says nothing.
	NotInExcerpt Status = "not in the excerpt"
	// Partial: a group of which the lines hold only some.
	Partial Status = "partial in the excerpt"
	// NoShape: logged, with no shape to plan the case from.
	NoShape Status = "no shape"
)

// Row is one buffer group of a case set against headroom's plan.
type Row struct {
	Case       string
	BufferType string // headroom's name
	Kind       string
	// LoggedMiB is what llama.cpp printed (summed over the group's
	// lines); Lines is how many it printed, 0 when none.
	LoggedMiB float64
	Lines     int
	// PlannedBytes is headroom's figure; Planned says there is one.
	PlannedBytes int64
	Planned      bool
	// BuildBytes is headroom's figure under the build's output rule
	// (Case.BuildOutputs); BuildPlanned says there is one.
	BuildBytes   int64
	BuildPlanned bool
	// BuildSlack is how far the build's figure may lie above BuildBytes
	// by a term the log does not show: without builds.Rules.MetalMappedSpan,
	// a Metal mapped span's offset into its page, which the real file's
	// header length decides (synth's header is not the real one).
	BuildSlack int64
	Status     Status
	// Explanation says why a Miss misses.
	Explanation string
}

// buildOrPlanned is headroom's figure under the build's rules where the
// case has rules of its own, else under headroom's.
func (r Row) buildOrPlanned() int64 {
	if r.BuildPlanned {
		return r.BuildBytes
	}
	return r.PlannedBytes
}

// ErrorPct is (headroom - llama.cpp) / llama.cpp in percent: negative is
// an under-estimate, the direction in which a plan that fits fails.
// NaN when either side is missing.
func (r Row) ErrorPct() float64 { return r.errorPct(r.PlannedBytes) }

// BuildErrorPct is ErrorPct of the figure under the build's own rules
// (the top of its range, BuildBytes+BuildSlack), or of headroom's where
// the case has no rules of its own.
func (r Row) BuildErrorPct() float64 {
	if r.BuildPlanned {
		return r.errorPct(r.BuildBytes + r.BuildSlack)
	}
	return r.ErrorPct()
}

func (r Row) errorPct(bytes int64) float64 {
	if !r.Planned || r.Lines == 0 || r.LoggedMiB == 0 {
		return math.NaN()
	}
	return 100 * (float64(bytes)/(1<<20) - r.LoggedMiB) / r.LoggedMiB
}

// Devices are the CPU and GPUs of the case's machine, named as llama.cpp
// names them for its backend.
func (c *Case) Devices() (plan.Device, []plan.Device) {
	cpu := plan.Device{Name: "CPU", Backend: "CPU", Features: c.Flags.CPUFeatures}
	prefix := c.Backend
	if c.Backend == "Metal" {
		prefix = "MTL"
	}
	gpus := make([]plan.Device, len(c.GPUs))
	for i := range c.GPUs {
		gpus[i] = plan.Device{Name: prefix + strconv.Itoa(i), Backend: c.Backend, NoEvents: c.Flags.GPUNoEvents}
		if i < len(c.Flags.GPUFreeMiB) {
			gpus[i].Free = c.Flags.GPUFreeMiB[i] << 20
		}
	}
	return cpu, gpus
}

// Profile is the case's flags as headroom takes them, under the rules
// of the first build headroom measured: the comparison and the
// explanations in docs/accuracy-public.md quote headroom's figures for
// it ("a current build"), and a later measured build's Metal and CUDA
// fusion rules would move them.
func (c *Case) Profile() plan.Profile {
	f := c.Flags
	p := plan.Defaults()
	first := builds.Measured()[0].Rules
	p.Rules = &first
	p.Ctx, p.Parallel, p.GPULayers = f.Ctx, f.Parallel, f.GPULayers
	p.Batch, p.UBatch = f.Batch, f.UBatch
	p.FlashAttn = plan.FlashAttn(f.FlashAttn)
	if f.CacheK != "" {
		p.CacheK = f.CacheK
	}
	if f.CacheV != "" {
		p.CacheV = f.CacheV
	}
	p.CPUMoE = f.CPUMoE
	// Load refused a case whose overrides do not parse.
	p.Overrides, _ = plan.ParseOverrides(f.Overrides...)
	p.KVUnified = f.KVUnified
	if len(f.TensorSplit) > 0 {
		p.TensorSplit = f.TensorSplit
	}
	p.Mmap = !f.NoMmap
	return p
}

// model is the header the comparison plans from: the case's shape and
// recipe, typed under the quantizer rules r, laid out as llama-quantize
// writes a file (catalog.DeriveModelWith), which decides the spans
// llama.cpp maps.
func (c *Case) model(r synth.QuantRules) (*arch.Model, error) {
	if c.Shape == nil {
		return nil, fmt.Errorf("%s: no shape", c.ID)
	}
	s, err := c.Shape.Resolve()
	if err != nil {
		return nil, err
	}
	q, err := synth.ParseQuant(c.Model.Quant)
	if err != nil {
		return nil, err
	}
	g, err := catalog.DeriveModelWith(s, q, r)
	if err != nil {
		return nil, err
	}
	return arch.FromGGUF(g)
}

// BuildModel is the header of the log's file as its build's
// llama-quantize typed it (Model.QuantRules).
func (c *Case) BuildModel() (*arch.Model, error) {
	var r synth.QuantRules
	if c.Model.QuantRules != nil {
		r = *c.Model.QuantRules
	}
	return c.model(r)
}

// Compare plans the case on its machine and sets every buffer group
// against the log. A case without a shape lists its logged groups as
// NoShape.
func (c *Case) Compare() ([]Row, error) {
	logged := make([]engine.Logged, len(c.Buffers))
	for i, b := range c.Buffers {
		b.Device = c.HeadroomName(b.Device)
		logged[i] = b
	}
	var planned, underBuild []plan.Buffer
	if c.Shape != nil {
		m, err := c.model(synth.QuantRules{})
		if err != nil {
			return nil, err
		}
		cpu, gpus := c.Devices()
		r, err := plan.Account(m, c.Profile(), cpu, gpus)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.ID, err)
		}
		planned = r.Buffers
		if c.BuildOutputs > 0 || c.BuildRules != nil || c.Model.QuantRules != nil {
			mb, err := c.BuildModel()
			if err != nil {
				return nil, err
			}
			p := c.Profile()
			if c.BuildRules != nil {
				r := *c.BuildRules
				// The page offset is left out of the planned span and
				// allowed for as BuildSlack.
				r.MetalMappedSpan = true
				p.Rules = &r
			}
			if c.BuildOutputs > 0 {
				p.OutputsMax = c.BuildOutputs
			}
			rb, err := plan.Account(mb, p, cpu, gpus)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.ID, err)
			}
			underBuild = rb.Buffers
		}
	}
	byGroup := map[string]int64{}
	for _, b := range underBuild {
		byGroup[b.BufferType+" "+string(b.Kind)] += b.Bytes
	}
	rec := engine.Reconcile(planned, logged)
	var rows []Row
	add := func(er engine.Row, planned bool) {
		row := Row{Case: c.ID, BufferType: er.BufferType, Kind: er.Kind, LoggedMiB: er.LoggedMiB,
			Lines: er.Lines, PlannedBytes: er.PlannedBytes, Planned: planned}
		if v, ok := byGroup[er.BufferType+" "+er.Kind]; ok {
			row.BuildBytes, row.BuildPlanned = v, true
			if c.BuildRules != nil && !c.BuildRules.MetalMappedSpan && metalMapped(er.BufferType) {
				row.BuildSlack = plan.MetalPage - 1
			}
		}
		switch {
		case c.Shape == nil:
			row.Status = NoShape
		case !planned:
			row.Status = Miss
		case er.Lines == 0 && !c.Complete:
			row.Status = NotInExcerpt
		case er.Lines == 0:
			row.Status = Miss
		case c.PartialGroups[er.BufferType+" "+er.Kind] != "":
			row.Status = Partial
			row.Explanation = c.PartialGroups[er.BufferType+" "+er.Kind]
		case er.Kind == "model" && !c.Model.QuantKnown:
			row.Status = QuantUnknown
		case er.Kind == "model" && c.Model.SplitFiles > 1 && strings.HasSuffix(er.BufferType, "_Mapped") && !er.Within:
			row.Status = SplitUnknown
		case er.Within && er.Kind == "compute":
			row.Status = Within
		case er.Within:
			row.Status = Equal
		default:
			row.Status = Miss
		}
		if row.Status == Miss {
			row.Explanation = c.Explanations[row.BufferType+" "+row.Kind]
			if row.Explanation == "" {
				row.Explanation = "unexplained"
			}
		}
		rows = append(rows, row)
	}
	for _, er := range rec.Rows {
		add(er, true)
	}
	for _, er := range rec.LoggedOnly {
		add(er, false)
	}
	for _, er := range rec.PlannedOnly {
		add(er, true)
	}
	return rows, nil
}

// metalMapped says a buffer type is a Metal buffer over the mapped file.
func metalMapped(buft string) bool {
	return strings.HasPrefix(buft, "MTL") && strings.HasSuffix(buft, "_Mapped")
}

// BuildEqual says the figure under the build's own rules (headroom's,
// where the case has none) prints as llama.cpp printed it: some figure
// from it to it plus BuildSlack does.
func (r Row) BuildEqual() bool {
	if !r.Planned && !r.BuildPlanned || r.Lines == 0 {
		return false
	}
	b := r.buildOrPlanned()
	lo, _ := strconv.ParseFloat(mib(b), 64)
	hi, _ := strconv.ParseFloat(mib(b+r.BuildSlack), 64)
	return r.LoggedMiB >= lo && r.LoggedMiB <= hi
}
