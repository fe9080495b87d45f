package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/term"
	"github.com/headroom-llm/headroom/launch"
	"github.com/headroom-llm/headroom/source"
	"github.com/headroom-llm/headroom/store"
)

// pullHelp is the help of 'headroom pull'.
const pullHelp = `
Downloads MODEL into headroom's store, but only after assessing that it
fits this machine (or --machine): the same search as 'headroom plan', so
nothing is downloaded that could not run. MODEL is a catalog variant
(ENTRY/QUANT, see headroom recommend), hf:OWNER/REPO:QUANT, hf:OWNER/REPO/
FILE.gguf[@REV] or a URL. Split models and the projector beside the model
come with it, and so does the speculative-decoding draft the catalog
reviewed for a catalog variant (--no-draft leaves it).

Free disk space is checked before the first byte. The progress line shows
bytes, rate and time left. An interrupted pull (Ctrl-C, a dropped
connection) keeps its partial file and resumes from it with an HTTP range
request next time. Each file's sha256 is checked against the Hub's listing
(and the catalog lock, when it pins the variant) before it is moved into
the content-addressed store; a file that does not match is deleted, never
installed.

The store is $HEADROOM_STORE, else $XDG_DATA_HOME/headroom/store, else
~/.local/share/headroom/store. Files sit under blobs/sha256/ and are
linked under models/OWNER/REPO/COMMIT/ with their own names.

Examples:
  headroom pull llama-3.1-8b-instruct/Q4_K_M
  headroom pull hf:Qwen/Qwen3-8B-GGUF:Q4_K_M --parallel 4
  headroom pull hf:owner/big-model-GGUF:Q8_0 --force`

func runPull(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "pull", "[flags] MODEL", pullHelp)
	machine := fs.String("machine", "", "assess against a preset or a file from headroom hw --json instead of this machine")
	llama := llamaServerFlag(fs)
	search := searchFlags(fs)
	refuseHere(fs, whyServeCompanions, "mm", "mmproj", "mmproj-offload", "no-mmproj-offload", "image-min-tokens", "image-max-tokens", "md", "model-draft", "spec-draft-model",
		"ngld", "gpu-layers-draft", "n-gpu-layers-draft", "spec-draft-ngl")
	force := fs.Bool("force", false, "download even if the model does not fit this machine (says what it overrides)")
	storeDir := fs.String("store", "", "the store directory (default: see above)")
	noDraft := fs.Bool("no-draft", false, "do not pull the speculative-decoding draft the catalog reviewed for this variant")
	asJSON := fs.Bool("json", false, "print the installed manifest as JSON")
	verify := fs.Bool("verify", true, "before downloading, ask llama.cpp itself (llama-fit-params beside llama-server, or on PATH) to project the planned load on a sparse twin of the header and compare it with the plan; --verify=false skips it")
	quiet := fs.Bool("quiet", false, "print no progress on standard error")
	ref, opts, err := parseSearch(fs, args, search)
	if err != nil {
		return err
	}
	d, err := launchDeps(env, *machine, *llama, *quiet)
	if err != nil {
		return err
	}
	note, err := engineNote(ctx, "", *llama)
	if err != nil {
		return err
	}
	opts.Base.Rules = &note.Rules
	fs.mlockLoads(&opts.Base, note.Rules)
	st, err := openStore(env, *storeDir, *quiet, d.Client)
	if err != nil {
		return err
	}
	m, err := d.Resolve(ctx, ref)
	if err != nil {
		return err
	}
	if *noDraft && m.Companions != nil {
		// Not pulled, so not counted.
		m.Companions.Draft, m.Draft = nil, nil
	}
	a, aerr := d.Assess(ctx, m, opts)
	if aerr == nil && *verify {
		aerr = a.AdmitProjected(d.Preflight(ctx, a)) // a refusal --force can override, like the plan's own
	}
	p, err := d.Pull(ctx, m, aerr, st, *force)
	if err != nil {
		return err
	}
	var draft *launch.Pulled
	if dm := m.Draft; dm != nil && !dm.Local() {
		// The draft is a model of its own, resolved with the model and
		// counted in its plan: verified and stored the same way.
		if draft, err = d.Pull(ctx, dm, nil, st, false); err != nil {
			return fmt.Errorf("draft %s: %w", dm.Ref, err)
		}
	}
	if *asJSON {
		out := struct {
			Path       string          `json:"path"`
			Overridden string          `json:"overridden,omitempty"`
			Manifest   *store.Manifest `json:"manifest"`
			Draft      *store.Manifest `json:"draft,omitempty"`
		}{Path: p.Path, Overridden: p.Overridden, Manifest: p.Manifest}
		if draft != nil {
			out.Draft = draft.Manifest
		}
		return printJSON(env.Stdout, out)
	}
	fmt.Fprintln(env.Stdout, p.Path)
	if draft != nil {
		fmt.Fprintln(env.Stdout, draft.Path)
	}
	return nil
}

// launchDeps builds what the pull and serve steps need: a Hub client, the
// embedded catalog and lock, and the machine (a fresh probe each time, or
// a fixed description).
func launchDeps(env Env, machine, llamaServer string, quiet bool) (*launch.Deps, error) {
	cat, err := catalog.Load()
	if err != nil {
		return nil, err
	}
	lock, err := catalog.LoadLock()
	if err != nil {
		return nil, err
	}
	client := source.NewClient(env.Getenv)
	d := &launch.Deps{Client: client, Catalog: cat, Lock: lock,
		Machine: func(ctx context.Context) (*hw.Snapshot, error) { return loadMachine(ctx, env, machine, llamaServer) }}
	// The llama.cpp that will load the model projects what headroom does
	// not model: the one named, or the one on PATH.
	d.FitParams, _ = engine.FindFitParams(llamaServer, nil)
	if !quiet {
		// Progress quotes references and listing names: escaped.
		client.Log = func(msg string) { fmt.Fprintln(env.Stderr, "  "+term.Text(msg)) }
		d.Say = func(state, line string) {
			fmt.Fprintln(env.Stderr, wrap(term.Text(line), fmt.Sprintf("%-11s ", state), strings.Repeat(" ", 12), textWidth))
		}
	}
	return d, nil
}

// openStore opens the store that downloads with client's credentials
// (the Hub token goes to the Hub's origin only).
func openStore(env Env, dir string, quiet bool, client *source.Client) (*store.Store, error) {
	if dir == "" {
		dir = store.DefaultRoot(env.Getenv)
	}
	st, err := store.Open(dir)
	if err != nil {
		return nil, err
	}
	if st.HTTP, err = client.DownloadClient(); err != nil {
		return nil, err
	}
	if !quiet {
		st.Progress = store.NewBar(env.Stderr, isTerminal(env.Stderr))
	}
	return st, nil
}

// isTerminal reports whether w is a character device, where a progress
// line may redraw itself; logs and pipes get plain lines instead.
func isTerminal(w io.Writer) bool {
	// Main's escaper stands between a command and the terminal.
	for {
		u, ok := w.(interface{ Unwrap() io.Writer })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
