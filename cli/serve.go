package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/term"
	"github.com/headroom-llm/headroom/launch"
	"github.com/headroom-llm/headroom/store"
)

// serveHelp is the help of 'headroom serve'.
const serveHelp = `
Runs MODEL with llama.cpp's llama-server, planned for this machine:

  resolving    the exact artifact (repository, commit, files, sha256)
  assessing    a hardware snapshot and the plan search ('headroom plan')
  downloading  into the store, only if it fits ('headroom pull')
  loading      a fresh snapshot and admission again, then llama-server
               with the planned flags
  ready        only after a real one-token completion succeeded: after an
               out-of-memory at init llama-server may still answer
               /health, so /health alone proves nothing
  failed       with the reason: does not fit, engine error, out of memory
               at init, engine exited, not ready in time

Once ready it prints how llama.cpp's logged buffers compare with the plan,
then serves until Ctrl-C (or SIGTERM), when it stops llama-server cleanly
(SIGTERM, then SIGKILL after 10 s). MODEL is anything 'headroom pull'
takes, or a local GGUF file.

With --check it proves a plan instead of serving: it loads the model with
the plan's flags, waits for a real completion, prints every buffer
llama.cpp logged beside the planned one, stops llama-server and exits 0
only if it was ready and every buffer is within the accounting bounds
(model, KV, recurrent state and output exactly as printed; compute within
5% or 16 MiB and never more than 2% under). Run it to trust a plan on your
own machine and llama.cpp build. --check-serving then sends distinct
prompts, as many at once as there are slots, until the prompt cache and
the context checkpoints stop growing, and holds llama-server's peak
resident memory to what the plan counts for RAM (docs/serving.md).

llama-server is looked up on PATH unless --llama-server names it; the
devices it reports (--list-devices) are the ones planned for. Its flags
that change nothing headroom counts (--api-key, --jinja, -t, sampling,
templates; docs/llama-flags.md) are passed to it unchanged, and serve's
own readiness completion sends the --api-key; flags that change memory
are planned (-c, -np, -ctk, -fa, ...) or refused with the reason.

Examples:
  headroom serve llama-3.1-8b-instruct/Q4_K_M
  headroom serve ./model.gguf --parallel 4 --port 8081
  headroom serve ./model.gguf --api-key "$KEY" --jinja -t 8
  headroom serve hf:Qwen/Qwen3-8B-GGUF:Q4_K_M --llama-server ~/llama.cpp/build/bin/llama-server
  headroom serve ./model.gguf --check`

func runServe(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "serve", "[flags] MODEL", serveHelp)
	machine := fs.String("machine", "", "assess against a preset or a file from headroom hw --json instead of probing this machine (for tests and dry runs)")
	search := searchFlags(fs)
	refuseHere(fs, whyServeCompanions, "mm", "mmproj", "mmproj-offload", "no-mmproj-offload", "image-min-tokens", "image-max-tokens", "md", "model-draft", "spec-draft-model",
		"ngld", "gpu-layers-draft", "n-gpu-layers-draft", "spec-draft-ngl")
	bin := fs.String("llama-server", "", "path to llama-server (default: found on PATH)")
	eng := fs.String("engine", "", "the llama.cpp `build` the plan is for: serve plans for the llama-server it starts, and refuses an --engine (a commit, bNNNN or a llama-server program) that names another")
	host := fs.String("host", "127.0.0.1", "address llama-server listens on")
	port := fs.Int("port", 8080, "port llama-server listens on (0: any free port)")
	storeDir := fs.String("store", "", "the store directory (see headroom pull --help)")
	noPull := fs.Bool("no-pull", false, "never download: serve only what is local or already in the store")
	readyTimeout := fs.Duration("ready-timeout", 10*time.Minute, "how long the load and the first completion may take")
	showLog := fs.Bool("engine-log", false, "copy llama-server's own output to standard error")
	quiet := fs.Bool("quiet", false, "print no progress on standard error")
	verify := fs.Bool("verify", true, "before anything is downloaded, ask llama.cpp itself: llama-fit-params beside llama-server projects the planned load without allocating (on a sparse twin of a Hub model's header) and is compared with the plan; --verify=false skips it")
	check := fs.Bool("check", false, "load, compare every logged buffer with the plan, stop; exit 0 only if all are within bounds")
	checkOpts := servingCheckFlags(fs)
	rpc := rpcFlag(fs)
	ref, opts, err := parseSearch(fs, args, search)
	if err != nil {
		return err
	}
	remotes := *rpc
	if *port < 0 || *port > 65535 {
		return usagef("--port must be 0 to 65535, not %d", *port)
	}
	sc, err := checkOpts(*check)
	if err != nil {
		return err
	}
	if *check && !fs.isSet("port") {
		*port = 0 // a check serves nobody: any free port
	}
	path, err := engine.Find(*bin, nil)
	if err != nil {
		return err
	}
	build, err := engine.Version(ctx, path)
	if err != nil {
		return err
	}
	// The plan follows the rules of the build that will load it, where
	// headroom knows them.
	note, err := startedEngine(ctx, *eng, build)
	if err != nil {
		return err
	}
	opts.Base.Rules = &note.Rules
	fs.mlockLoads(&opts.Base, note.Rules)
	d, err := launchDeps(env, *machine, path, *quiet)
	if err != nil {
		return err
	}
	if len(remotes) > 0 {
		// The servers are asked before llama-server connects: each
		// serves one client at a time.
		local := d.Machine
		d.Machine = func(ctx context.Context) (*hw.Snapshot, error) {
			s, err := local(ctx)
			if err != nil {
				return nil, err
			}
			return joinRemotes(ctx, s, remotes)
		}
	}
	d.Engine = build.String()
	d.Cache = &admission.Cache{}
	if !*quiet {
		d.Say("resolving", fmt.Sprintf("llama-server %s at %s", build, path))
		// serve's own check (--check) reconciles the real load; this
		// says up front whether the plan's figures are for this build.
		d.Say("resolving", note.Says)
	}
	st, err := openStore(env, *storeDir, *quiet, d.Client)
	if err != nil {
		return err
	}
	run, err := d.Launch(ctx, ref, launch.Options{Search: opts, Store: st, NoPull: *noPull,
		// The engine check asks the llama.cpp on this machine; over RPC
		// the load spans hosts its projection does not see.
		EngineCheck: *verify && len(remotes) == 0,
		Load: launch.LoadOptions{Bin: path, Ledger: sharedLedger(st), Records: filepath.Join(st.Root, "runs"), Observations: filepath.Join(st.Root, "observed"),
			Host: *host, Port: *port, ReadyTimeout: *readyTimeout, Log: logSink(env, *showLog)},
	})
	if err != nil {
		say(d, "failed", failureKind(err))
		return err
	}
	printReady(env.Stdout, ref, run)
	if *check {
		return finishCheck(ctx, env, d, run, sc)
	}
	return serveUntilDone(ctx, d, run)
}

// printReady says the server is ready: where, with which flags, how its
// logged buffers compare with the plan.
func printReady(w io.Writer, ref string, run *launch.Running) {
	fmt.Fprintf(w, "ready: %s serves %s\n", run.Server.URL(), term.Text(ref))
	fmt.Fprintln(w, wrap(strings.Join(run.Flags, " "), "  flags: ", "    ", textWidth))
	fmt.Fprintf(w, "  %s\n", run.Reconciliation.Summary())
	if run.Recorded != "" {
		fmt.Fprintf(w, "  recorded in %s\n", run.Recorded)
	}
}

// rpcFlag is --rpc: the rpc-servers a model is spread over.
func rpcFlag(fs *flags) *[]string {
	var remotes []string
	fs.Func("rpc", "spread the model over hosts running rpc-server: `HOST:PORT[,HOST:PORT...]` (each asked for its devices over the RPC protocol; HOST:PORT=FILE takes the host's 'headroom hw --json' instead); repeatable, in --rpc order", func(v string) error {
		remotes = append(remotes, strings.Split(v, ",")...)
		return nil
	})
	return &remotes
}

// finishCheck ends 'serve --check': the reconciliation printed, the server
// stopped, and an error unless every buffer was within bounds.
func finishCheck(ctx context.Context, env Env, d *launch.Deps, run *launch.Running, sc servingCheckOptions) error {
	writeReconciliation(env.Stdout, run.Reconciliation)
	servingOK := true
	if sc.on && run.Reconciliation.OK() {
		lines, ok, err := servingCheck(ctx, d, run, sc)
		for _, l := range lines {
			fmt.Fprintln(env.Stdout, l)
		}
		if err != nil {
			fmt.Fprintln(env.Stdout, err)
		}
		servingOK = ok && err == nil
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	say(d, "stopping", "check done; stopping llama-server")
	if err := run.Stop(stopCtx); err != nil {
		return err
	}
	if !run.Reconciliation.OK() {
		return fmt.Errorf("check failed: %s", run.Reconciliation.Summary())
	}
	if !servingOK {
		return fmt.Errorf("check failed: llama-server grew past the plan while serving")
	}
	proof := engine.Proof(run.Flags)
	if run.Reconciliation.Projected {
		fmt.Fprintf(env.Stdout, "check passed: ready after a real %s, every buffer at or under llama.cpp's projection\n", proof)
	} else {
		fmt.Fprintf(env.Stdout, "check passed: ready after a real %s, every buffer within bounds\n", proof)
	}
	return nil
}

// serveUntilDone serves until the user stops headroom or llama-server
// exits on its own, then stops it cleanly.
func serveUntilDone(ctx context.Context, d *launch.Deps, run *launch.Running) error {
	var died error
	select {
	case <-ctx.Done():
		say(d, "stopping", "stopping llama-server")
	case <-exited(run.Server):
		died = fmt.Errorf("llama-server exited on its own after it was ready: %s", strings.Join(run.Server.LogTail(3), " | "))
		say(d, "failed", "engine exited")
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return errors.Join(died, run.Stop(stopCtx))
}

func say(d *launch.Deps, state, line string) {
	if d.Say != nil {
		d.Say(state, line)
	}
}

// exited is closed when the server's process ends.
func exited(s *engine.Server) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		s.Wait()
		close(ch)
	}()
	return ch
}

// logSink is where llama-server's own output goes: standard error with
// --engine-log, else nowhere (its buffers are still parsed).
func logSink(env Env, show bool) io.Writer {
	if show {
		return env.Stderr
	}
	return nil
}

// failureKind names a failed serve's reason in a few words; the error
// itself follows on the next line.
func failureKind(err error) string {
	var (
		nf   *launch.NotFit
		ref  *admission.Refusal
		fail *engine.Failure
	)
	switch {
	case errors.As(err, &nf):
		return strings.ReplaceAll(nf.Verdict, "_", " ")
	case errors.As(err, &ref):
		return "not admitted beside what headroom already runs"
	case errors.As(err, &fail):
		return strings.ReplaceAll(string(fail.Reason), "_", " ")
	case errors.Is(err, context.Canceled):
		return "interrupted"
	}
	return "error"
}

// sharedLedger is the admission ledger every headroom process using this
// store shares, so a serve in another terminal (or the API) counts.
func sharedLedger(st *store.Store) *admission.Ledger {
	return &admission.Ledger{Path: filepath.Join(st.Root, "ledger.json")}
}

// writeReconciliation prints every buffer group: what was planned, what
// llama.cpp logged, and whether they agree.
func writeReconciliation(w io.Writer, r engine.Reconciliation) {
	fmt.Fprintf(w, "  %-14s %-14s %12s %12s  %s\n", "buffer", "kind", "planned MiB", "logged MiB", "")
	row := func(x engine.Row, verdict string) {
		planned, logged := fmt.Sprintf("%.2f", float64(x.PlannedBytes)/(1<<20)), fmt.Sprintf("%.2f", x.LoggedMiB)
		if x.Lines == 0 {
			logged = "-"
		}
		kind := x.Kind
		if x.Model != "" {
			kind = x.Model + " " + kind
		}
		fmt.Fprintf(w, "  %-14s %-14s %12s %12s  %s\n", x.BufferType, kind, planned, logged, verdict)
	}
	for _, x := range r.Rows {
		switch {
		case r.Projected && x.Within:
			row(x, fmt.Sprintf("at or under the projection (%+.2f MiB)", float64(x.DiffBytes)/(1<<20)))
		case r.Projected:
			row(x, fmt.Sprintf("OVER the projection (%+.2f MiB)", float64(x.DiffBytes)/(1<<20)))
		case !x.Within:
			row(x, fmt.Sprintf("OUT of bounds (%+.2f MiB)", float64(x.DiffBytes)/(1<<20)))
		case x.Kind == "compute":
			row(x, fmt.Sprintf("within bounds (%+.2f MiB)", float64(x.DiffBytes)/(1<<20)))
		default:
			row(x, "equal")
		}
	}
	for _, x := range r.PlannedOnly {
		row(x, "planned, not logged")
	}
	for _, x := range r.LoggedOnly {
		row(x, "logged, not planned")
	}
}
