package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/source"
)

func runRecommend(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "recommend", "[flags]", `
Assesses every configuration in headroom's catalog (each model at each
quantization) on this machine, or on --machine, and ranks the ones that fit
by --goal. Configurations that do not fit are listed after them, disabled,
with the memory domain that is short and by how much; architectures
headroom cannot model are listed last as incompatible.

Every configuration is screened with a closed-form estimate of weights,
KV cache and compute (its plan says "~"); the best --exact ones are then
planned buffer by buffer with the same search as 'headroom plan'. Variants
whose lock was never resolved are planned from headers derived from their
public configuration (provenance: derived); 'headroom catalog lock' makes
them inspected.

Goals: quality (the cited score, MMLU-Redux from one evaluation for 17
models; entries without one follow, largest first), speed (estimated
decode speed), context (context per slot), balanced (the default):
configurations of at least 10 tokens/s first, the largest model among
them, a cited score deciding between models of one size. Every fitting row
carries an estimated decode speed (docs/speed.md).

Examples:
  headroom recommend
  headroom recommend --machine rtx-4090 --goal context --min-ctx 32768
  headroom recommend --capability vision --license apache-2.0,mit --json`)
	o := catalog.DefaultOptions()
	machine := fs.String("machine", "", "a preset (see headroom hw --presets) or a file from headroom hw --json; default: this machine")
	llama := llamaServerFlag(fs)
	fs.StringVar(&o.Goal, "goal", catalog.GoalBalanced, "ranking: quality, speed, balanced or context")
	caps := fs.String("capability", "", "comma-separated capabilities every entry must have: tools, vision, reasoning, embedding")
	lic := fs.String("license", "", "comma-separated licenses to accept (e.g. apache-2.0,mit)")
	fs.IntVar(&o.MinCtx, "min-ctx", o.MinCtx, "the least context per slot; entries trained on less are left out")
	for _, n := range []string{"np", "parallel"} {
		fs.IntVar(&o.Parallel, n, o.Parallel, "parallel conversations (slots); each gets its own context")
	}
	target := fs.Int64("fit-target", 1024, "MiB to leave free in every memory domain")
	fs.IntVar(&o.Exact, "exact", o.Exact, "how many of the best-ranked fitting configurations get a full plan search (-1: all; slower)")
	all := fs.Bool("all", false, "list disabled and incompatible configurations too (the default lists the fitting ones and a count of the rest)")
	asJSON := fs.Bool("json", false, "print every configuration as JSON")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("recommend takes no arguments, got %q", pos)
	}
	switch o.Goal {
	case catalog.GoalQuality, catalog.GoalSpeed, catalog.GoalBalanced, catalog.GoalContext:
	default:
		return usagef("--goal must be quality, speed, balanced or context, not %q", o.Goal)
	}
	if o.Parallel < 1 || o.MinCtx < 256 || *target < 0 {
		return usagef("--parallel must be 1 or more, --min-ctx 256 or more, --fit-target 0 or more")
	}
	o.FitTarget = *target << 20
	o.Capabilities, o.Licenses = splitList(*caps), splitList(*lic)
	cat, err := catalog.Load()
	if err != nil {
		return err
	}
	lock, err := catalog.LoadLock()
	if err != nil {
		return err
	}
	snap, err := loadMachine(ctx, *machine, *llama)
	if err != nil {
		return err
	}
	rows, err := catalog.Recommend(cat, lock, snap, o)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Goal    string        `json:"goal"`
			Machine string        `json:"machine"`
			Speed   string        `json:"speed"`
			Rows    []catalog.Row `json:"configurations"`
		}{o.Goal, machineName(*machine), "decode speed estimated for every fitting row, one sequence, empty context (docs/speed.md)", rows})
	}
	printRecommend(env.Stdout, rows, o, machineName(*machine), *all)
	return nil
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

func printRecommend(w io.Writer, rows []catalog.Row, o catalog.Options, machine string, all bool) {
	fmt.Fprintf(w, "%s, goal %s, %s of at least %d tokens\n\n", machine, o.Goal, plural(o.Parallel, "slot", "slots"), o.MinCtx)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tmodel\tquant\tclass\tsize\tctx/slot\tgpu layers\tkv\ttok/s\tquality\tinputs")
	hidden := map[string]int{}
	for _, r := range rows {
		if !r.Enabled && !all {
			hidden[r.Verdict]++
			continue
		}
		rank, ctxs, ngl, kv := "-", "-", "-", "-"
		if r.Enabled {
			rank = strconv.Itoa(r.Rank)
			est := ""
			if r.Plan.Source == "estimate" {
				est = "~"
			}
			ctxs = est + strconv.Itoa(r.Plan.CtxPerSlot)
			ngl = fmt.Sprintf("%s%d/%d", est, r.Plan.GPULayers, r.Plan.LayersTotal)
			if r.Plan.CPUMoE > 0 {
				ngl += fmt.Sprintf(" (moe %d cpu)", r.Plan.CPUMoE)
			}
			kv = r.Plan.CacheType
		}
		q := "null"
		if r.Quality != nil {
			q = strconv.FormatFloat(r.Quality.Score, 'f', -1, 64)
		}
		class := r.Class
		if r.ActiveB != nil {
			class = fmt.Sprintf("moe %.0fB/%.1fB", r.ParamsB, *r.ActiveB)
		} else {
			class = fmt.Sprintf("%s %.1fB", r.Class, r.ParamsB)
		}
		size := bytesSI(r.SizeBytes)
		if r.SizeSource == "derived" {
			size = "~" + size
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", rank, r.Entry, r.Quant, class, size, ctxs, ngl, kv, decodeCell(r.Speed), q, r.Provenance)
		if !r.Enabled {
			fmt.Fprintf(tw, "\t%s\n", disabledWhy(r))
		}
	}
	tw.Flush()
	if n := hidden[plan.DoesNotFit] + hidden[plan.Incompatible]; n > 0 {
		fmt.Fprintf(w, "\n%d more do not fit and %d are incompatible (--all lists them with the limiting resource).\n", hidden[plan.DoesNotFit], hidden[plan.Incompatible])
	}
	for _, r := range rows {
		if r.Enabled && r.Plan.Source == "search" {
			fmt.Fprintf(w, "\n#%d: llama-server -hf %s %s\n", r.Rank, strings.TrimPrefix(r.Ref, "hf:"), strings.Join(r.Plan.Flags, " "))
		}
	}
	fmt.Fprintln(w, "\n~ estimate (closed form; --exact N plans more buffer by buffer). inputs: derived = from the public config and quant recipe, inspected = from the locked GGUF header.")
	fmt.Fprintln(w, "tok/s: estimated decode speed of one sequence at an empty context (? uncalibrated backend; docs/speed.md).")
}

func disabledWhy(r catalog.Row) string {
	if r.Verdict == plan.Incompatible {
		return "incompatible: " + r.Reason
	}
	if r.Limiting != nil && r.Limiting.Shortfall > 0 {
		return fmt.Sprintf("does not fit: %s short by %s", r.Limiting.Domain, bytesIEC(r.Limiting.Shortfall))
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
		client.Log = func(msg string) { fmt.Fprintln(env.Stderr, msg) }
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
