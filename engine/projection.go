package engine

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/plan/graph"
)

// An architecture headroom does not replay is still one the user's
// llama.cpp knows: its llama-fit-params creates the model and context
// with no_alloc and prints what each device would hold. A Projector turns
// that breakdown into headroom's buffers, so the verdict, the domains and
// the search run on llama.cpp's own figures. Two things differ from the
// llama-server that will run: llama-fit-params' context keeps a logits
// row per batch token (n_outputs_max = n_batch), which makes its compute
// buffers larger than llama-server's (one row per slot), and its
// breakdown leaves out the output buffer, which is added here by
// llama-server's rule. Both keep the figures above what llama-server
// allocates, never below.

// ProjectedNote is said of every buffer that comes from a projection;
// the verdict and the plan say the rest (ProjectedSays).
const ProjectedNote = "llama.cpp's projection, printed MiB rounded up"

// ProjectedSays is what a verdict or plan from projections says of its
// figures.
func ProjectedSays(arch, bin string) string {
	return fmt.Sprintf("architecture %s is not one headroom models: the figures are llama.cpp's own projection (%s, no allocation), whose compute keeps a logits row per batch token where llama-server keeps one per slot, so they count more than llama-server allocates", arch, bin)
}

// Projector asks one llama.cpp build to project loads of one model.
type Projector struct {
	// Bin is llama-fit-params.
	Bin string
	// Model is the model's first file, or its sparse twin.
	Model string
	// Env is the environment llama-fit-params runs in.
	Env []string
	// Basics are the header's facts: the vocabulary sizes the output
	// buffer, which the breakdown leaves out.
	Basics arch.Basics
}

// Account projects the load of profile p and returns it as headroom's
// buffers on the devices cpu and gpus. A breakdown row naming a device the
// machine being planned for does not have is an error: the build asked
// cannot speak for that machine.
func (pr Projector) Account(ctx context.Context, p plan.Profile, cpu plan.Device, gpus []plan.Device) (*plan.Result, error) {
	args := p.LoadArgs()
	rows, lines, err := project(ctx, pr.Bin, pr.Model, args, pr.Env, "5")
	if err != nil {
		return nil, err
	}
	r, err := ProjectedResult(rows, p, pr.Basics, cpu, gpus)
	if err != nil {
		return nil, err
	}
	if c, ok := projectedContext(lines, p, pr.Basics); ok {
		r.Context = c
	}
	return r, nil
}

// ProjectedResult turns a breakdown into buffers: each row's model,
// context and compute figures (printed in whole MiB rounded down, so
// 1 MiB is added to each non-zero one), plus llama-server's output
// buffer, which no row counts.
func ProjectedResult(rows []BreakdownRow, p plan.Profile, b arch.Basics, cpu plan.Device, gpus []plan.Device) (*plan.Result, error) {
	r := &plan.Result{Context: estimatedContext(p, b)}
	for _, row := range rows {
		dev, buft := cpu.Name, row.Name
		switch {
		case row.Name == "Host":
			buft = "Host"
		case extraCPUBuffers[row.Name]:
		default:
			if !slices.ContainsFunc(gpus, func(g plan.Device) bool { return g.Name == row.Name }) {
				if row.Model+row.Context+row.Compute == 0 {
					continue
				}
				return nil, fmt.Errorf("llama.cpp's projection puts %d MiB on %s, a device the machine being planned for does not have: the llama.cpp asked can speak only for the machine it runs on", row.Model+row.Context+row.Compute, row.Name)
			}
			dev = row.Name
		}
		for _, part := range []struct {
			kind plan.BufferKind
			mib  int64
		}{{plan.KindModel, row.Model}, {plan.KindKV, row.Context}, {plan.KindCompute, row.Compute}} {
			if part.mib <= 0 {
				continue
			}
			r.Buffers = append(r.Buffers, plan.Buffer{Device: dev, BufferType: buft, Kind: part.kind, Bytes: (part.mib + 1) << 20, Note: ProjectedNote})
		}
	}
	rowsOut := int64(p.ServerOutputsMax(r.Context.NBatch))
	r.Buffers = append(r.Buffers, plan.Buffer{Device: cpu.Name, BufferType: cpu.Name, Kind: plan.KindOutput, Bytes: 4 * int64(b.NVocab) * rowsOut,
		Note: fmt.Sprintf("llama-server's logits: %d rows of %d floats (the breakdown leaves it out)", rowsOut, b.NVocab)})
	return r, nil
}

// estimatedContext is the context as llama_context resolves p, by its
// rules of every recent build: n_ctx from the trained context when 0,
// padded to 256, split between sequences unless unified, the batch capped
// by the context and the micro-batch by the batch. Flash attention is
// what p asks for; the log, where it says more, replaces this
// (projectedContext).
func estimatedContext(p plan.Profile, b arch.Basics) graph.Context {
	nseq := max(p.Parallel, 1)
	n := p.Ctx
	if n == 0 {
		n = b.CtxTrain
	}
	n = max(n, 256)
	c := graph.Context{NSeq: nseq, NStream: nseq, Unified: p.KVUnified, CtxTrain: b.CtxTrain, SWAFull: p.SWAFull, Flash: p.FlashAttn == plan.FlashOn}
	c.NCtx = (n + 255) / 256 * 256
	c.NCtxSeq = c.NCtx
	if !p.KVUnified {
		c.NCtxSeq = (c.NCtx/nseq + 255) / 256 * 256
		c.NCtx = c.NCtxSeq * nseq
	} else {
		c.NStream = 1
	}
	c.NBatch = min(p.Batch, c.NCtx)
	c.NUBatch = min(p.UBatch, c.NBatch)
	c.TypeK, _ = plan.CacheType(p.CacheK)
	c.TypeV, _ = plan.CacheType(p.CacheV)
	c.VTrans = !c.Flash
	return c
}

// contextLine is one of llama_context's "name = value" lines.
var contextLine = regexp.MustCompile(`llama_context:\s+(n_seq_max|n_ctx|n_ctx_seq|n_batch|n_ubatch|flash_attn|kv_unified)\s+=\s+(\S+)`)

// projectedContext reads the context llama-fit-params created from its
// log, where it printed it; ok is false when it printed none.
func projectedContext(lines []string, p plan.Profile, b arch.Basics) (graph.Context, bool) {
	c := estimatedContext(p, b)
	seen := false
	for _, l := range lines {
		l = ansiEscape.ReplaceAllString(l, "")
		// resolve_fused_ops logs "Flash Attention enabled" when -fa auto
		// resolves to on.
		if strings.Contains(l, "Flash Attention enabled") {
			c.Flash = true
		}
		m := contextLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		seen = true
		n, err := strconv.Atoi(m[2])
		switch m[1] {
		case "flash_attn": // auto, disabled or enabled (llama_flash_attn_type_name)
			if m[2] == "enabled" {
				c.Flash = true
			}
		case "kv_unified":
			c.Unified = m[2] == "true"
		}
		if err != nil {
			continue
		}
		switch m[1] {
		case "n_seq_max":
			c.NSeq = n
		case "n_ctx":
			c.NCtx = n
		case "n_ctx_seq":
			c.NCtxSeq = n
		case "n_batch":
			c.NBatch = n
		case "n_ubatch":
			c.NUBatch = n
		}
	}
	c.NStream = c.NSeq
	if c.Unified {
		c.NStream = 1
	}
	c.VTrans = !c.Flash
	return c, seen
}

// WhyNotProjected says why the model of header h, which headroom could
// not model (archErr), cannot be answered through llama.cpp's projection
// either, or "" when it can: an error that is not arch.Incompatible's
// Unmodeled (a wrong file) is its own;
// an architecture refused on purpose says why; without a llama-fit-params
// (fitParams "") the reason names the one thing that fixes it.
func WhyNotProjected(h *gguf.Model, archErr error, fitParams string) string {
	if archErr == nil {
		return ""
	}
	name := h.Architecture()
	var inc *arch.Incompatible
	switch {
	case name == "" || !errors.As(archErr, &inc) || !inc.Unmodeled:
		// A file that is wrong whatever reads it.
		return archErr.Error()
	case arch.RefusedReason(name) != "":
		return fmt.Sprintf("architecture %q is %s", name, arch.RefusedReason(name))
	}
	if _, err := arch.BasicsOf(h); err != nil {
		why := err.Error()
		if errors.As(err, &inc) {
			why = inc.Reason
		}
		return fmt.Sprintf("architecture %q is not one headroom models, and its header cannot be projected: %s", name, why)
	}
	if fitParams == "" {
		what := fmt.Sprintf("architecture %q is not one headroom models", name)
		if slices.Contains(arch.Known(), name) {
			// A variant of a modeled architecture: say which.
			what = inc.Reason
		}
		return fmt.Sprintf("%s, and no llama.cpp was found to project it: install llama.cpp (llama-fit-params is built with llama-server) or pass --llama-server PATH, and headroom asks its llama-fit-params", what)
	}
	return ""
}
