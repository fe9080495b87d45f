package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/term"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/source"
)

// recommendHelp is the help of 'headroom recommend'.
const recommendHelp = `
Assesses every configuration in headroom's catalog (each model at each
quantization) on this machine, or on --machine, and ranks the ones that fit
by --goal. Configurations that do not fit are listed after them, disabled,
with the memory domain that is short and by how much; architectures
headroom cannot model are listed last as incompatible.

Every configuration is planned buffer by buffer with the same search and
defaults as 'headroom plan', so a row and 'headroom plan ENTRY/QUANT'
give the same context, layers, cache type and slots. The plans are kept
in the cache directory ($XDG_CACHE_HOME/headroom/recommend, else
~/.cache/headroom/recommend) for this build of headroom, the catalog,
this machine's memory sizes and these options; a later run judges them
against the memory free then (a plan that no longer fits is shown as not
fitting now, with the shortfall) and plans again only when a GiB more is
free than when they were made. Variants
whose lock was never resolved are planned from headers derived from their
public configuration (provenance: derived); 'headroom catalog lock' makes
them inspected.

Goals: quality (the cited score, MMLU-Redux from one evaluation for 17
models; entries without one follow, largest first), speed (estimated
decode speed), context (context per slot), balanced (the default):
configurations of at least 10 tokens/s first, the largest model among
them, a cited score deciding between models of one size. Every fitting row
carries an estimated decode speed (docs/speed.md). The listing says its
order in one line, the memory each plan needs apart from the download's
size, and fits 100 columns (--json has every name and figure whole).

The exit status is 0 when at least one configuration fits, 1 when none
does (the listing is printed, with --json too), 2 for a command line that
is wrong.

Examples:
  headroom recommend
  headroom recommend --machine rtx-4090 --goal context --min-ctx 32768
  headroom recommend --capability vision --license apache-2.0,mit --json`

func runRecommend(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "recommend", "[flags]", recommendHelp)
	o := catalog.DefaultOptions()
	machine := fs.String("machine", "", "a preset (see headroom hw --presets) or a file from headroom hw --json; default: this machine")
	llama := llamaServerFlag(fs)
	eng := engineFlag(fs)
	fs.StringVar(&o.Goal, "goal", catalog.GoalBalanced, "ranking: quality, speed, balanced or context")
	caps := fs.String("capability", "", "comma-separated capabilities every entry must have: tools, vision, reasoning, embedding, rerank (embedding models and rerankers are listed only when asked for)")
	lic := fs.String("license", "", "comma-separated licenses to accept (e.g. apache-2.0,mit)")
	fs.IntVar(&o.MinCtx, "min-ctx", o.MinCtx, "the least context per slot; entries trained on less are left out")
	fs.IntVar(&o.Parallel, "np", o.Parallel, "parallel conversations (slots); each gets its own context")
	fs.alias("np", "parallel")
	target := fs.Int64("fit-target", 1024, "MiB to leave free in every memory domain")

	remeasure := fs.Bool("remeasure", false, "measure this machine's memory bandwidth again instead of using the figure kept from the first measurement")
	all := fs.Bool("all", false, "list disabled and incompatible configurations too (the default lists the fitting ones and a count of the rest)")
	asJSON := fs.Bool("json", false, "print every configuration as JSON (its fields: docs/json.md)")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("recommend takes no arguments, got %q", pos)
	}
	if !slices.Contains(catalog.Goals(), o.Goal) {
		return usagef("--goal %q: want %s", o.Goal, strings.Join(catalog.Goals(), ", "))
	}
	if err := checkCounts(o.Parallel, o.MinCtx, *target); err != nil {
		return err
	}
	o.FitTarget = *target << 20
	o.Capabilities, o.Licenses = splitList(*caps), splitList(*lic)
	cat, err := catalog.Load()
	if err != nil {
		return err
	}
	if err := cat.CheckFilters(o.Capabilities, o.Licenses); err != nil {
		var fe *catalog.FilterError
		if errors.As(err, &fe) {
			return usagef("--%s %q: want %s (comma-separated)", fe.Filter, fe.Value, strings.Join(fe.Allowed, ", "))
		}
		return err
	}
	if dir := cacheDir(env, "recommend"); dir != "" {
		o.Cache, o.Build = dirCache{dir, cacheMaxAge}, buildID()
	}
	lock, err := catalog.LoadLock()
	if err != nil {
		return err
	}
	if *remeasure && *machine != "" {
		return usagef("--remeasure measures this machine; --machine %s is described, not measured", *machine)
	}
	snap, err := loadMachine(ctx, env, *machine, *llama)
	if *remeasure {
		snap, err = env.probe(ctx, probeOptions(env, *llama, true))
	}
	if err != nil {
		return err
	}
	note, err := engineNote(ctx, *eng, *llama)
	if err != nil {
		return err
	}
	o.Rules = &note.Rules
	o.Calibration = machineCalibration(env, snap, env.Stderr)
	rows, err := catalog.Recommend(cat, lock, snap, o)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := printJSON(env.Stdout, recommendReport{o.Goal, machineName(*machine), note, catalog.SpeedSays, rows}); err != nil {
			return err
		}
	} else {
		printRecommend(env.Stdout, rows, o, snap, machineName(*machine), *all)
		fmt.Fprintln(env.Stdout, "\n"+wrap(note.Says, "engine: ", "  ", textWidth))
	}
	// The listing above says why; the exit status says it to scripts, as
	// fit's and plan's do.
	if !slices.ContainsFunc(rows, func(r catalog.Row) bool { return r.Enabled }) {
		return fmt.Errorf("no configuration of the %d listed fits on %s", len(rows), machineName(*machine))
	}
	return nil
}

// recommendReport is what 'recommend --json' prints (docs/json.md).
type recommendReport struct {
	Goal    string            `json:"goal"`
	Machine string            `json:"machine"`
	Engine  engine.EngineNote `json:"engine"`
	Speed   string            `json:"speed"`
	Rows    []catalog.Row     `json:"configurations"`
}

func machineName(m string) string {
	if m == "" {
		return "this machine"
	}
	return m
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// shownRows is how many fitting configurations recommend lists without
// --all: enough to choose from, short enough to read on one screen.
const shownRows = 10

func printRecommend(w io.Writer, rows []catalog.Row, o catalog.Options, snap *hw.Snapshot, machine string, all bool) {
	fmt.Fprintln(w, wrap(term.Text(machineLine(snap, machine)), "", "  ", textWidth))
	// The GPU layers column and the order's GPU clauses say something only
	// on a machine with a GPU of its own: with none, or with unified
	// memory, every layer is in the one pool.
	gpu := slicesHasKind(snap, hw.KindDevice)
	fmt.Fprintln(w, wrap(fmt.Sprintf("goal %s, %s of at least %d tokens each; order: %s",
		o.Goal, plural(o.Parallel, "slot", "slots"), o.MinCtx, catalog.OrderSays(o.Goal, gpu)), "", "  ", textWidth))
	fmt.Fprintln(w)
	var listed []catalog.Row
	fit, notFit, incompatible := 0, 0, 0
	for _, r := range rows {
		switch {
		case r.Enabled:
			fit++
		case r.Verdict == plan.Incompatible:
			incompatible++
		default:
			notFit++
		}
		if all || r.Enabled && len(listed) < shownRows {
			listed = append(listed, r)
		}
	}
	if len(listed) > 0 {
		fmt.Fprint(w, recommendTable(listed, gpu))
		fmt.Fprintln(w)
	}
	shown := 0
	for _, r := range listed {
		if r.Enabled {
			shown++
		}
	}
	switch {
	case all:
		fmt.Fprintf(w, "%d fit, %d do not fit, %d are incompatible.\n", fit, notFit, incompatible)
	case fit > shown:
		fmt.Fprintln(w, wrap(fmt.Sprintf("%d more fit, %d do not fit and %d are incompatible (--all lists them all, with what is short and by how much).", fit-shown, notFit, incompatible), "", "", textWidth))
	default:
		fmt.Fprintln(w, wrap(fmt.Sprintf("%d do not fit and %d are incompatible (--all lists them, with what is short and by how much).", notFit, incompatible), "", "", textWidth))
	}
	for _, r := range rows {
		if !r.Enabled {
			continue
		}
		fmt.Fprintf(w, "\nTo run #1, %s %s:\n", r.Entry, r.Quant)
		serve := "headroom serve " + r.Entry + "/" + r.Quant
		if o.Parallel != catalog.DefaultOptions().Parallel {
			serve += " -np " + strconv.Itoa(o.Parallel)
		}
		fmt.Fprintf(w, "  %s\n", serve)
		args := append([]string{"llama-server", "-hf", strings.TrimPrefix(r.Ref, "hf:")}, r.Plan.Flags...)
		fmt.Fprintln(w, "  "+strings.ReplaceAll(wrapCommand(args, textWidth-2), "\n", "\n  "))
		break
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, wrap("memory: GiB the plan needs, all memory domains together; download: GiB of files, "+
		"~ derived from the public config and quant recipe, not read from the locked GGUF header.", "", "  ", textWidth))
	fmt.Fprintln(w, wrap("tok/s: estimated decode speed of one sequence at an empty context; "+speedCalibration(rows, snap.Hardware != "")+" (docs/speed.md).", "", "  ", textWidth))
	if slices.ContainsFunc(rows, func(r catalog.Row) bool { return catalog.Embeds(r.Capabilities) }) {
		fmt.Fprintln(w, wrap("An embedding model or reranker generates nothing: its tok/s only orders it among its kind; it reads its inputs at prompt-processing speed, which 'headroom plan' bounds.", "", "  ", textWidth))
	}
}

// recommendTable lays the rows out in columns, with the reason under each
// row that does not fit, outside the alignment. The GPU layers column is
// left out on a machine without a GPU of its own, where it would say
// nothing, and
// the quality column where no row shown has a cited score. The model
// column is shortened (the full name is in --json) to keep the table
// within textWidth.
func recommendTable(rows []catalog.Row, gpu bool) string {
	quality := false
	for _, r := range rows {
		quality = quality || r.Quality != nil
	}
	head := []string{"#", "model", "quant", "memory", "download", "ctx/slot"}
	right := []bool{false, false, false, true, true, true}
	if gpu {
		head, right = append(head, "gpu layers"), append(right, false)
	}
	head, right = append(head, "tok/s"), append(right, true)
	if quality {
		head, right = append(head, "quality"), append(right, true)
	}
	cells := [][]string{head}
	for _, r := range rows {
		rank, mem, ctxs, ngl := "-", "-", "-", "-"
		if r.Enabled {
			rank = strconv.Itoa(r.Rank)
			mem = gib1(r.Plan.MemoryBytes)
			ctxs = strconv.Itoa(r.Plan.CtxPerSlot)
			ngl = fmt.Sprintf("%d/%d", r.Plan.GPULayers, r.Plan.LayersTotal)
			if r.Plan.CPUMoE > 0 {
				ngl += fmt.Sprintf(" ncmoe %d", r.Plan.CPUMoE)
			}
		}
		size := gib1(r.SizeBytes)
		if r.SizeSource == "derived" {
			size = "~" + size
		}
		row := []string{rank, r.Entry, r.Quant, mem, size, ctxs}
		if gpu {
			row = append(row, ngl)
		}
		row = append(row, decodeCell(r.Speed))
		if quality {
			q := "-"
			if r.Quality != nil {
				q = strconv.FormatFloat(r.Quality.Score, 'f', -1, 64)
			}
			row = append(row, q)
		}
		cells = append(cells, row)
	}
	// The model column gets what the others leave of textWidth.
	others := 0
	for i := range head {
		if i == 1 {
			continue
		}
		width := 0
		for _, c := range cells {
			width = max(width, utf8.RuneCountInString(c[i]))
		}
		others += width + 2
	}
	room := max(textWidth-others, 16)
	t := &table{right: right}
	for i, c := range cells {
		c[1] = truncate(c[1], room)
		t.row(c...)
		if i > 0 && !rows[i-1].Enabled {
			t.note(wrap(disabledWhy(rows[i-1]), "     ", "       ", textWidth))
		}
	}
	return t.String()
}

// machineLine says in one line what recommend planned for: each memory
// domain's size and bandwidth, with where each figure came from.
func machineLine(s *hw.Snapshot, name string) string {
	var parts []string
	gpus := 0
	for _, d := range s.Domains {
		size := bytesIEC(d.Capacity)
		if d.Usable > 0 && d.Usable < d.Capacity {
			size += ", " + bytesIEC(d.Usable) + " usable"
		}
		what, src := "RAM", shortSource(d.Source)
		switch d.Kind {
		case hw.KindDevice:
			gpus++
			name := deviceName(s, d.ID)
			what = strings.TrimSpace("GPU " + name)
			src = strings.TrimSpace(strings.TrimPrefix(src, name))
		case hw.KindUnified:
			what = "unified memory"
		}
		p := fmt.Sprintf("%s %s (%s)", what, size, src)
		if d.BandwidthGBps > 0 {
			p += fmt.Sprintf(", %g GB/s (%s)", d.BandwidthGBps, shortSource(d.BandwidthSource))
		} else {
			p += ", bandwidth unknown"
		}
		parts = append(parts, p)
	}
	if gpus == 0 && !slicesHasKind(s, hw.KindUnified) {
		parts = append(parts, "no GPU")
	}
	return fmt.Sprintf("machine: %s: %s", name, strings.Join(parts, "; "))
}

func slicesHasKind(s *hw.Snapshot, kind string) bool {
	for _, d := range s.Domains {
		if d.Kind == kind {
			return true
		}
	}
	return false
}

// deviceName is the description of the first device drawing from a
// domain, without the views' backend names.
func deviceName(s *hw.Snapshot, domain string) string {
	for _, d := range s.Devices {
		if d.Domain == domain && d.Description != "" {
			return d.Description
		}
	}
	return ""
}

// sourceDate is the date a kept measurement was taken, as hw says it.
var sourceDate = regexp.MustCompile(`\bon \d{4}-\d{2}-\d{2}\b`)

// shortSource keeps a figure's source to its first clause: "assumption",
// "/proc/meminfo MemTotal, MemAvailable", "measured here on 2026-01-02".
func shortSource(src string) string {
	if src == "" {
		return "source unknown"
	}
	date := sourceDate.FindString(src)
	if i := strings.Index(src, ":"); i > 0 {
		src = src[:i]
	}
	return strings.TrimSpace(src + " " + date)
}

func disabledWhy(r catalog.Row) string {
	if r.Verdict == plan.Incompatible {
		return "incompatible: " + r.Reason
	}
	if r.Limiting != nil && r.Limiting.Shortfall > 0 {
		return fmt.Sprintf("does not fit: %s short by %s", r.Limiting.Domain, roughSize(r.Limiting.Shortfall))
	}
	return r.Reason
}

func runCatalog(ctx context.Context, env Env, args []string) error {
	if len(args) == 0 || args[0] != "lock" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(env.Stdout, "Usage: headroom catalog lock [--out FILE]\n\nResolves every catalog variant through the Hugging Face Hub and writes the lock.")
			return nil
		}
		return usagef("the only subcommand is lock: headroom catalog lock [--out FILE]")
	}
	fs := newFlags(env, "catalog lock", "[--out FILE]", `
Resolves every variant of the catalog through the Hugging Face Hub API
(HF_ENDPOINT, HF_TOKEN): the commit its revision names, each file's size
and sha256 (the LFS oid), and the planner inputs from its GGUF header,
read with HTTP range requests. References that resolve to the same
immutable file share one package. Writes the lock as JSON (default:
standard output); commit it as catalog/lock.json to ship it.`)
	out := fs.String("out", "", "write the lock to FILE instead of standard output")
	quiet := fs.Bool("quiet", false, "print no progress on standard error")
	pos, err := fs.parse(args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("catalog lock takes no arguments")
	}
	cat, err := catalog.Load()
	if err != nil {
		return err
	}
	client := source.NewClient(env.Getenv)
	if !*quiet {
		client.Log = func(msg string) { fmt.Fprintln(env.Stderr, term.Text(msg)) }
	}
	l, err := catalog.Lock(ctx, client, cat.Entries)
	if err != nil {
		return fmt.Errorf("%w (the Hub at %s must be reachable; set HF_ENDPOINT for a mirror; nothing was written)", err, client.Endpoint)
	}
	if *out == "" {
		return l.Write(env.Stdout)
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := l.Write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// speedCalibration says where the speed estimates of the rows shown come
// from and how far they have been off: this machine's own llama-bench
// runs, published results they were not fitted on, or a prior, marked
// "?". On a probed machine with rough rows it offers headroom bench.
func speedCalibration(rows []catalog.Row, probed bool) string {
	lo, hi, published, rough := 0.0, 0.0, false, false
	var here []string
	for _, r := range rows {
		if !r.Enabled || r.Speed == nil || r.Speed.DecodeTokensPerSec == nil {
			continue
		}
		switch {
		case !r.Speed.Calibrated:
			rough = true
		case len(r.Speed.CalibratedOn) > 0:
			for _, on := range r.Speed.CalibratedOn {
				if !slices.Contains(here, on) {
					here = append(here, on)
				}
			}
		default:
			if !published || r.Speed.ErrorLowPct < lo {
				lo = r.Speed.ErrorLowPct
			}
			if !published || r.Speed.ErrorHighPct > hi {
				hi = r.Speed.ErrorHighPct
			}
			published = true
		}
	}
	var parts []string
	for _, on := range here {
		parts = append(parts, "calibrated on "+on)
	}
	if published {
		parts = append(parts, "calibrated figures were "+errorRange(lo, hi)+" off published results they were not fitted on")
	}
	if rough {
		s := "? uncalibrated backend, a rough figure with no error bound"
		if probed {
			s += "; 'headroom bench' measures this machine in a minute or two and calibrates them"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "none estimated"
	}
	return strings.Join(parts, "; ")
}

func decodeCell(s *catalog.Speed) string {
	switch {
	case s == nil:
		return "-"
	case s.DecodeTokensPerSec == nil:
		return "unknown"
	case !s.Calibrated:
		return fmt.Sprintf("%.0f?", *s.DecodeTokensPerSec)
	}
	return fmt.Sprintf("%.0f", *s.DecodeTokensPerSec)
}
