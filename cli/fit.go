package cli

import (
	"context"
	"fmt"
	"github.com/headroom-llm/headroom/report"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/term"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/speed"
)

// fitHelp is the help of 'headroom fit'.
const fitHelp = `
Computes every buffer llama.cpp would allocate for MODEL with the given
serving flags (llama-server's names and meanings) on this machine, or on
--machine, and says whether it fits: per physical memory domain, the model,
context, compute and auxiliary bytes against what is available. When it
does not fit it names the limiting domain, the shortfall, and the nearest
context or layer split that would fit.

Compute buffers are replayed from llama.cpp's graph (across devices
through a model of ggml's scheduler), for llama-server's own output rows
(one per slot). On the CPU and on Vulkan they match llama.cpp's own
figures for every architecture headroom supports (docs/accuracy.md); on
CUDA, Metal and ROCm they are estimates from the same model, not yet
measured there. 'headroom serve MODEL --check' compares a plan with your
own llama-server and device.

MODEL is a file, a URL, a Hugging Face reference, a catalog variant
(ENTRY/QUANT) or a catalog entry alone (ENTRY): its quant that recommend
ranks first on this machine, else its smallest, said on standard error.

A projector (--mmproj) and a draft model (-md) are counted as auxiliary
memory: the projector's weights on the first GPU with its encoder's
compute buffer (a replay of Gemma 3's encoder on the CPU, a rough estimate
otherwise), the draft's weights and its one context beside the model's,
as llama-server creates them. --spec-type draft-mtp
drafts with the model's own MTP head (Qwen3.5 and 3.6): its weights, the
draft context and the target's recurrent snapshots are counted
(docs/speculative.md).

An architecture headroom does not model (docs/coverage.md) is answered by
your own llama.cpp: llama-fit-params beside --llama-server (or on PATH)
projects the load without allocating, and the verdict uses its figures,
rounded up, plus llama-server's logits buffer; the output says so.

` + pastedHelp + `

--program says which llama.cpp program will run the model: llama-server
(the default), llama-cli, llama-completion, or library (a context made
with llama_context_default_params, as node-llama-cpp makes one). They
differ in memory: llama-server and llama-cli reserve one logits row per
slot where llama-completion and a library context keep -b of them, so
their compute buffers are larger; only llama-server defaults to 4 slots
sharing one cache (the others: one sequence, and no -kvu for llama-cli
and llama-completion); a library context's sliding-window caches are
full-size unless --swa-full=false (node-llama-cpp passes false). The
verdict names the program, and the command printed is that program's, or
for a library the llama_model_params and llama_context_params to give
it. --verify and --bench are llama-server's only.

The first line is the verdict (what needs how many GiB of how many, and
what is left), the second, for a profile that fits, the llama-server
command that runs it; the exact MiB per domain and buffer follow, within
100 columns.

The exit status is 0 when the profile fits, 1 when it does not fit or is
incompatible (the verdict is printed, with --json too), 2 for a command
line that is wrong.

--bench measures a profile that fits with llama.cpp's own llama-bench
(beside --llama-server, or on PATH), on the model's file where it is
local and on a sparse twin of its header otherwise, within --bench-budget.

Examples:
  headroom fit model.gguf -c 8192 -np 1
  headroom fit model.gguf --mmproj mmproj.gguf -md draft.gguf -c 16384
  headroom fit hf:Qwen/Qwen3-8B-GGUF:Q4_K_M --machine rtx-4090 -ngl all
  headroom fit model.gguf --machine snapshot.json --json
  headroom fit model.gguf -c 8192 --bench
  headroom fit model.gguf -c 8192 --program library --swa-full=false`

func runFit(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "fit", "[flags] MODEL", fitHelp)
	profile := profileFlags(fs)
	companions := companionFlags(fs)
	machine := fs.String("machine", "", "a preset (see headroom hw --presets) or a file from headroom hw --json; default: this machine")
	llama := llamaServerFlag(fs)
	asJSON := fs.Bool("json", false, "print the assessment as JSON (its fields: docs/json.md)")
	quiet := fs.Bool("quiet", false, "print no progress on standard error")
	eng := engineFlag(fs)
	verify := fs.Bool("verify", false, "also ask llama.cpp itself: run llama-fit-params (beside --llama-server, or on PATH) on the model file, which projects the load without reading weights or allocating, and compare its memory breakdown with headroom's, row by row")
	bench, budget := benchFlags(fs)
	ref, err := fs.parseModel(args)
	if err != nil {
		return err
	}
	p, err := profile()
	if err != nil {
		return err
	}
	if err := serverOnly(p.Program, *verify, *bench); err != nil {
		return err
	}
	snap, err := loadMachine(ctx, env, *machine, *llama)
	if err != nil {
		return err
	}
	nglWarning := gpuLayersHere(fs, &p, snap)
	note, err := engineNote(ctx, *eng, *llama)
	if err != nil {
		return err
	}
	if ref, err = entryQuant(env, ref, snap, p.Parallel, 0, &note.Rules); err != nil {
		return err
	}
	in, err := openInputs(ctx, env, ref, *quiet)
	if err != nil {
		return err
	}
	if p.Companions, err = companions(ctx, env, *quiet, in.header()); err != nil {
		return err
	}
	if err := p.Check(); err != nil {
		return usagef("--program %s: %v", p.Program, err)
	}
	p.Rules = &note.Rules
	fs.mlockLoads(&p, note.Rules)
	var a *plan.Assessment
	pr, why := openProjection(ctx, env, in, *llama, p.Program)
	if pr != nil {
		defer pr.cleanup()
		if p.Companions != nil {
			return errProjectedCompanions
		}
		a, err = pr.Assess(ctx, p, snap)
	} else {
		a, err = plan.Assess(in.Arch, in.ArchErr, p, snap)
		if a != nil && a.Verdict == plan.Incompatible && why != "" {
			a.Reason = why
		}
	}
	if err != nil {
		return err
	}
	if nglWarning != "" {
		a.Warnings = append(a.Warnings, nglWarning)
	}
	if w := mlockWarning(plan.LockedBytes(a.Buffers, p), *machine == ""); w != "" {
		a.Warnings = append(a.Warnings, w)
	}
	x := planExtras{verify: *verify && in.ArchErr == nil, bench: *bench && a.Verdict == plan.Fits, budget: *budget, llama: *llama, quiet: *quiet}
	check, measured, err := x.fit(ctx, env, in, a, p, snap)
	if err != nil {
		return err
	}
	if *asJSON {
		rep := fitReport(in, a, p)
		rep.EngineCheck, rep.Engine, rep.Measured = check, &note, measured
		if err := printJSON(env.Stdout, rep); err != nil {
			return err
		}
	} else {
		printFit(env.Stdout, in, a, p)
		fmt.Fprintln(env.Stdout, "\n"+wrap(note.Says, "engine: ", "  ", textWidth))
		if check != nil {
			printCheck(env.Stdout, check)
		}
		if measured != nil {
			fmt.Fprintln(env.Stdout)
			printMeasured(env.Stdout, measured, nil)
		}
	}
	if a.Verdict != plan.Fits {
		// The output above says why; the exit status says it to scripts,
		// as plan's does.
		return verdictError{a.Reason}
	}
	return nil
}

// fit asks llama.cpp itself about fit's profile with --verify and
// measures it with --bench (a profile that fits: a twin the machine
// cannot hold is what does_not_fit says).
func (x planExtras) fit(ctx context.Context, env Env, in *modelInputs, a *plan.Assessment, p plan.Profile, snap *hw.Snapshot) (*engine.Check, *speed.Measured, error) {
	var check *engine.Check
	var m *speed.Measured
	var err error
	if x.verify {
		cpu, gpus := plan.Devices(snap)
		if check, err = engineCheck(ctx, env, in, p, cpu, gpus, x.llama); err != nil {
			return nil, nil, fmt.Errorf("--verify: %w", err)
		}
	}
	if x.bench {
		depth := 0
		if a.Resolved != nil {
			depth = a.Resolved.NCtxSeq
		}
		if m, err = measure(ctx, env, in, p, snap, depth, x.llama, x.budget, x.quiet); err != nil {
			return nil, nil, err
		}
	}
	return check, m, nil
}

// noGPUWarning is what fit and plan say of -ngl on a machine without a
// GPU.
const noGPUWarning = "-ngl has no effect here: the machine has no GPU, so every layer runs on the CPU (-ngl 0)"

// gpuLayersHere says -ngl one way on a machine without a GPU: -ngl 0, as
// a plan for the machine does, with a warning where a number of layers
// was given.
func gpuLayersHere(fs *flags, p *plan.Profile, snap *hw.Snapshot) string {
	if _, gpus := plan.Devices(snap); len(gpus) > 0 {
		return ""
	}
	given := fs.isSet("ngl", "gpu-layers", "n-gpu-layers") && p.GPULayers != 0
	p.GPULayers = 0
	if given {
		return noGPUWarning
	}
	return ""
}

func fitReport(in *modelInputs, a *plan.Assessment, p plan.Profile) report.Fit {
	art := report.Artifact{Ref: in.Ref, Architecture: in.Architecture, SizeBytes: in.Size, Inputs: in.Provenance}
	if h := in.Header; h != nil {
		art.Commit, art.Files = h.Artifact.Commit, h.Artifact.Files
	}
	return report.NewFit(art, a, p)
}

func printFit(w io.Writer, in *modelInputs, a *plan.Assessment, p plan.Profile) {
	// The architecture, device and domain names come from a header or
	// a machine file, and the sentences quote them: term.Text escapes.
	headline := fitHeadline(in, a, p.Program)
	fmt.Fprintln(w, wrap(term.Text(headline), "", "  ", textWidth))
	if a.Verdict == plan.Fits {
		if a.Resolved != nil {
			p.Ctx = a.Resolved.NCtx // as llama.cpp will create it
		}
		fmt.Fprintln(w, wrapCommand(p.Command(modelArgs(in)), textWidth))
	}
	fmt.Fprintln(w)
	field := func(label, value string) {
		fmt.Fprintln(w, wrap(value, fmt.Sprintf("%-9s", label), strings.Repeat(" ", 11), textWidth))
	}
	field("model", fmt.Sprintf("%s (%s), %s", term.Text(in.Ref), term.Text(in.Architecture), bytesIEC(in.Size)))
	if note := in.inputsNote(); note != "" {
		field("inputs", note)
	}
	if c := a.Resolved; c != nil {
		field("context", fmt.Sprintf("%d cells, %d per sequence x %s%s, batch %d/%d, flash attention %v, K %s, V %s",
			c.NCtx, c.NCtxSeq, plural(c.NSeq, "sequence", "sequences"), map[bool]string{true: " (unified)", false: ""}[c.Unified], c.NBatch, c.NUBatch, onOff(c.Flash), c.TypeK, c.TypeV))
	}
	if !strings.Contains(headline, a.Reason) {
		field("verdict", term.Text(a.Reason))
	}
	if st := a.LoadStaging; st != nil {
		field("loading", fmt.Sprintf("%s %.2f MiB on %s beside the buffers (%s)", st.Kind, float64(st.Bytes)/(1<<20), term.Text(st.Device), term.Text(st.Note)))
	}
	for _, wn := range a.Warnings {
		field("warning", term.Text(wn))
	}
	for _, b := range a.Backends {
		if !b.Measured {
			field("backend", fmt.Sprintf("%s (%s): %s", term.Text(b.Backend), term.Text(strings.Join(b.Devices, ", ")), term.Text(b.Says)))
		}
	}
	if len(a.Domains) > 0 {
		fmt.Fprintln(w)
		t := &table{right: []bool{false, false, true, true, true, true, true, true, true, true}}
		// MiB in every column, said once: the table stays within 100
		// columns with the serving column beside the load's four.
		t.row("domain", "views", "model", "context", "compute", "aux", "serving", "required", "available", "margin MiB")
		for _, d := range a.Domains {
			t.row(term.Text(d.ID), term.Text(strings.Join(d.Views, ",")), m2(d.Model), m2(d.Context),
				m2(d.Compute), m2(d.Auxiliary), m2(d.Serving), m2(d.Required), m2(d.Available), m2(d.Margin))
		}
		fmt.Fprint(w, t)
	}
	// The buffers llama.cpp allocates at load, then what llama-server
	// holds past the load while it serves, in one table: the kinds
	// (prompt_cache, checkpoints, process) tell them apart.
	printBuffers(w, append(append([]plan.Buffer{}, a.Buffers...), a.Serving...))
	if len(a.Fixes) > 0 {
		fmt.Fprintln(w, "\nwhat would fit:")
		for _, f := range a.Fixes {
			if len(f.Flags) == 0 {
				fmt.Fprintln(w, wrap(term.Text(f.Says), "  ", "    ", textWidth))
				continue
			}
			fmt.Fprintln(w, wrap(term.Text(f.Says), fmt.Sprintf("  %-12s ", strings.Join(f.Flags, " ")), strings.Repeat(" ", 15), textWidth))
		}
	}
}

// fitHeadline is fit's verdict in one plain line: what, how much it
// needs, what is available and what is left, in GiB with one decimal; the
// domain table below has the exact MiB. A verdict the domains do not
// explain (the load's staging, an incompatible model) is said as the
// assessment says it.
func fitHeadline(in *modelInputs, a *plan.Assessment, pr plan.Program) string {
	var lim *hw.DomainUse
	for i, d := range a.Domains {
		if a.Limiting != nil && d.ID == *a.Limiting {
			lim = &a.Domains[i]
		}
	}
	// A file by its name; a catalog variant whole: its quant alone
	// (Q4_K_M) would not say which model.
	name := filepath.Base(in.Ref)
	if in.Header == nil {
		name = in.Ref
	}
	name = truncate(name, 40)
	who := programLabel(pr)
	switch {
	case lim == nil || a.LoadStaging != nil:
	case a.Verdict == plan.Fits && lim.Margin >= 0:
		return fmt.Sprintf("fits%s: %s needs %s of %s GiB %s, %s GiB spare",
			who, name, gib1(lim.Required), gib1(lim.Available), domainWords(lim), gib1(lim.Margin))
	case a.Verdict == plan.DoesNotFit && lim.Margin < 0 && loadFits(a, lim.ID):
		return fmt.Sprintf("does not fit while serving%s: %s grows to %s GiB %s, %s at load, of %s: %s GiB short",
			who, name, gib1(lim.Required), domainWords(lim), gib1(lim.Required-lim.Serving), gib1(lim.Available), gib1(-lim.Margin))
	case a.Verdict == plan.DoesNotFit && lim.Margin < 0:
		return fmt.Sprintf("does not fit%s: %s needs %s GiB %s, which has %s GiB: %s GiB short",
			who, name, gib1(lim.Required), domainWords(lim), gib1(lim.Available), gib1(-lim.Margin))
	}
	if a.Verdict == plan.Incompatible && !strings.HasPrefix(a.Reason, "incompatible") {
		return "incompatible" + who + ": " + a.Reason
	}
	if who != "" {
		return strings.TrimPrefix(who, " ") + ": " + a.Reason
	}
	return a.Reason
}

// loadFits says whether domain id has room for the load alone: what
// makes it short is what the server grows to while serving.
func loadFits(a *plan.Assessment, id string) bool {
	for _, d := range a.Load {
		if d.ID == id {
			return d.Margin >= 0
		}
	}
	return false
}

// domainWords names a memory domain as a person knows it: "in RAM", "on
// gpu0 (CUDA0)".
func domainWords(d *hw.DomainUse) string {
	switch {
	case d.Kind == hw.KindSystem:
		return "in RAM"
	case d.Kind == hw.KindUnified:
		return "in unified memory"
	case len(d.Views) > 0:
		return fmt.Sprintf("on %s (%s)", d.ID, d.Views[0])
	}
	return "on " + d.ID
}

// printBuffers prints the buffer table in exact MiB; a note shared by
// several buffers is written once under the table and marked in its rows.
func printBuffers(w io.Writer, buffers []plan.Buffer) {
	if len(buffers) == 0 {
		return
	}
	fmt.Fprintln(w)
	t := &table{right: []bool{false, false, false, true, false}}
	t.row("device", "buffer", "kind", "MiB", "note")
	var notes []string
	for _, b := range buffers {
		kind := string(b.Kind)
		if b.Model != "" {
			kind = b.Model + " " + kind
		}
		mark := ""
		if b.Note != "" {
			i := slices.Index(notes, b.Note)
			if i < 0 {
				i, notes = len(notes), append(notes, b.Note)
			}
			mark = fmt.Sprintf("[%d]", i+1)
		}
		t.row(term.Text(b.Device), term.Text(b.BufferType), term.Text(kind), fmt.Sprintf("%.2f", float64(b.Bytes)/(1<<20)), mark)
	}
	fmt.Fprint(w, t)
	for i, n := range notes {
		mark := fmt.Sprintf("[%d] ", i+1)
		fmt.Fprintln(w, wrap(term.Text(n), mark, strings.Repeat(" ", len(mark)), textWidth))
	}
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// m2 formats bytes as whole MiB for the domain table.
func m2(n int64) string { return fmt.Sprintf("%.0f", float64(n)/(1<<20)) }
