package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/headroom-llm/headroom/internal/term"
	"github.com/headroom-llm/headroom/launch"
	"github.com/headroom-llm/headroom/llamaflags"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/server"
)

// serveAPIHelp is the help of 'headroom serve-api'.
const serveAPIHelp = `
Serves headroom's HTTP API and web panel, on 127.0.0.1 unless --addr says
otherwise:

  /                  the panel: memory domains as bars, a model's plan as
                     stacked model/context/compute/auxiliary segments,
                     context and slot controls that re-plan live, the
                     recommendation list
  /api/hw            the hardware snapshot (?machine=PRESET)
  /api/fit           ?model=M&ctx=N&parallel=N&ngl=N&ctk=T&ctv=T&fa=on|off|auto,
                     or &args=FLAGS: a llama.cpp command line, read as fit's
  /api/plan          ?model=M&parallel=N&min_ctx=N&goal=G&headless=1
  /api/recommend     ?goal=G&min_ctx=N&parallel=N&capability=a,b
  /v1/models         the catalog as an OpenAI-compatible model list; what
                     does not fit is listed, disabled, with the reason
  /api/load          POST {"model":M,"ctx":N,"parallel":N}: resolve,
                     assess, ask llama-fit-params (as serve does), pull,
                     admit and start llama-server
  /api/unload        POST {"id":ID} or {"model":NAME}: stops it (a
                     served model finishes its requests first)
  /api/pin, /api/unpin
                     POST {"model":NAME}: never stop it to make room or
                     for idleness, or again allow it
  /models/load, /models/unload
                     POST {"model":NAME}, as llama-server's router takes
                     them: load a served model now, or stop it
  /api/instances     what runs, with each served model's memory per
                     domain, its load's progress, and every load,
                     eviction and refusal
  /metrics           Prometheus' text format: memory per domain, each
                     model's booking, state, requests in flight and
                     waiting, stops and refusals by reason, load times
  /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/rerank
                     OpenAI-compatible, routed by the body's model (as
                     /v1/models names it): a model not loaded is loaded
                     first, stopping the least recently used idle ones
                     when the ledger says there is no room; 503 with
                     the reason when it cannot fit even then, 404
                     model_not_found for a name it does not serve
                     (OpenAI's error object). A streamed request that
                     waits for a load gets ": headroom-progress {...}"
                     comments (step and percent) until its first token.
                     Embedding models run with --embedding, rerankers
                     with --rerank, as their plans say

M is a catalog variant (ENTRY/QUANT), an hf: reference or a file inside
headroom's store; requests can name no other path and no URL. Every load
goes through one admission ledger: two models that each fit alone but not
together are never both started, however many requests arrive at once.
Loads need llama-server (PATH or --llama-server); without it the API
plans but does not load. --models-dir serves a directory's GGUF files
under their names without .gguf (a split model by its first shard's);
--pin keeps a model from being stopped to make room or for idleness.
--models-preset FILE gives each model its own settings, in the INI file
llama-server's router reads (--models-preset): a [NAME] section per
model, its keys llama-server's flags without dashes (c = 8192, np = 2,
ctk = q8_0, jinja = true), [*] for every model, and model = PATH or
hf-repo = REPO to name the file; headroom's own keys are pin,
idle-timeout, alias, load-on-startup, stop-timeout, goal and min-ctx.
Each model is planned with serve-api's flags and its own after them.
The file is read again on SIGHUP or when it changes; a bad file is
refused with its line and the settings before it stay.
See docs/provider.md.

The API answers only requests naming its loopback address (Host
127.0.0.1, localhost or [::1]) from its own origin, and state-changing
requests only as application/json, so a web page on another site cannot
drive it. Listening beyond loopback needs --allow-remote and a token
(--token-file, $HEADROOM_API_TOKEN, or one generated and printed; --token
works but shows the token to every user of this machine in ps), which
every API request must send as "Authorization: Bearer TOKEN"; the panel
takes it from its address's #token= fragment. A token has at least 16
characters, printable ASCII without spaces. Anyone on that network who has
the token can load models: see docs/security.md.

Examples:
  headroom serve-api
  headroom serve-api --models-dir ~/models --pin qwen3-8b/Q4_K_M --idle-timeout 30m
  headroom serve-api --models-dir ~/models --models-preset ~/models/models.ini --hide-remote
  headroom serve-api --addr 127.0.0.1:9000 --machine rtx-4090
  headroom serve-api --addr 0.0.0.0:8787 --allow-remote
  headroom serve-api --addr 0.0.0.0:8787 --allow-remote --token-file ~/.config/headroom/api-token`

// serveAPIFlags are serve-api's flags, defined on a fresh flag set: the
// command line's, and each model's settings read as that command line
// with the model's flags after it.
type serveAPIFlags struct {
	fs                                   *flags
	addr, tokenFile, token, machine, bin *string
	eng, storeDir, dir, presets          *string
	remote, hideRemote                   *bool
	readyTimeout, idle                   *time.Duration
	queue                                *int
	pins                                 names
	search                               func() (plan.SearchOptions, error)
}

func newServeAPIFlags(env Env) *serveAPIFlags {
	fs := newFlags(env, "serve-api", "[flags]", serveAPIHelp)
	f := &serveAPIFlags{fs: fs}
	f.addr = fs.String("addr", "127.0.0.1:8787", "address to listen on (beyond loopback only with --allow-remote)")
	f.remote = fs.Bool("allow-remote", false, "allow an --addr beyond loopback; every API request then needs the token")
	f.tokenFile = fs.String("token-file", "", "read the API token for --allow-remote from this file (default $HEADROOM_API_TOKEN, else a generated one, printed)")
	f.token = fs.String("token", "", "the API token on the command line, where ps shows it to every user of this machine: prefer --token-file or $HEADROOM_API_TOKEN")
	f.machine = fs.String("machine", "", "answer for a preset or a file from headroom hw --json instead of this machine")
	f.bin = fs.String("llama-server", "", "path to llama-server (default: found on PATH)")
	f.eng = fs.String("engine", "", "the llama.cpp `build` plans are for (a commit, bNNNN or a llama-server program) when no llama-server is found to load with; where one is, plans follow its build and an --engine naming another is refused")
	f.storeDir = fs.String("store", "", "the store directory (see headroom pull --help)")
	f.readyTimeout = fs.Duration("ready-timeout", 10*time.Minute, "how long a load and its first completion may take")
	f.dir = fs.String("models-dir", "", "serve the GGUF files of this `directory` on the OpenAI-compatible endpoints, each under its name without .gguf")
	f.presets = fs.String("models-preset", "", "per-model settings: llama-server's router presets `file` (INI: a [NAME] section per model, keys are llama-server flags without dashes, plus pin, idle-timeout, alias, load-on-startup, stop-timeout, goal, min-ctx); read again on SIGHUP or when it changes")
	fs.Var(&f.pins, "pin", "never stop this `model` (a --models-dir name, a catalog variant, ...) to make room or for idleness; may be repeated")
	f.idle = fs.Duration("idle-timeout", 0, "stop a served model after this long without a request (0: never)")
	f.hideRemote = fs.Bool("hide-remote", false, "leave the catalog's variants that are not in the store out of /v1/models (they are still served when named)")
	f.queue = fs.Int("queue", server.DefaultQueue, "requests that may wait for one model to load; past it they are answered 503 with Retry-After")
	f.search = searchFlags(fs)
	refuseHere(fs, whyServeCompanions, "mm", "mmproj", "mmproj-offload", "no-mmproj-offload", "image-min-tokens", "image-max-tokens", "md", "model-draft", "spec-draft-model",
		"ngld", "gpu-layers-draft", "n-gpu-layers-draft", "spec-draft-ngl")
	return f
}

// parse reads args and returns the search options they give.
func (f *serveAPIFlags) parse(args []string) (plan.SearchOptions, error) {
	pos, err := f.fs.parseModels(args)
	if err != nil {
		return plan.SearchOptions{}, err
	}
	if len(pos) != 0 {
		return plan.SearchOptions{}, usagef("serve-api takes no arguments, got %q", pos)
	}
	if err := childFlags(f.fs.line); err != nil {
		return plan.SearchOptions{}, err
	}
	opts, err := f.search()
	if err != nil {
		return opts, err
	}
	if opts.Base.Spec != nil {
		return opts, usagef("--spec-type, --spec-draft-n-max, -ctkd and -ctvd: %s", whyServeAPISpec)
	}
	return opts, nil
}

func runServeAPI(ctx context.Context, env Env, args []string) error {
	f := newServeAPIFlags(env)
	opts, err := f.parse(args)
	if err != nil {
		return err
	}
	addr, remote, tokenFile, token, machine, bin, eng, storeDir := f.addr, f.remote, f.tokenFile, f.token, f.machine, f.bin, f.eng, f.storeDir
	readyTimeout, dir, pins, idle, queue := f.readyTimeout, f.dir, f.pins, f.idle, f.queue
	// A bad token is refused before anything starts.
	tok, err := apiToken(env, *token, *tokenFile, *remote)
	if err != nil {
		return err
	}
	// The llama-server the API loads with is also the one asked for this
	// machine's devices.
	binPath, engineName := "", ""
	note, err := engineNote(ctx, *eng, "")
	if err != nil {
		return err
	}
	if path, err := engine.Find(*bin, nil); err != nil {
		fmt.Fprintf(env.Stderr, "headroom serve-api: %v\n  the API will plan but not load models\n", oneLine(err.Error()))
	} else if build, err := engine.Version(ctx, path); err != nil {
		fmt.Fprintf(env.Stderr, "headroom serve-api: %v\n  the API will plan but not load models\n", oneLine(err.Error()))
	} else {
		binPath, engineName = path, build.String()
		if note, err = startedEngine(ctx, *eng, build); err != nil {
			return err
		}
		fmt.Fprintf(env.Stderr, "headroom serve-api: %s\n", note.Says)
	}
	opts.Base.Rules = &note.Rules
	f.fs.mlockLoads(&opts.Base, note.Rules)
	d, err := launchDeps(env, *machine, binPath, true)
	if err != nil {
		return err
	}
	d.Cache = &admission.Cache{}
	d.Engine = engineName
	snapshots := &snapshotCache{env: env, machine: *machine, llamaServer: binPath, ttl: 2 * time.Second}
	d.Machine = snapshots.fresh
	st, err := openStore(env, *storeDir, true, d.Client)
	if err != nil {
		return err
	}
	rt := &apiRuntime{base: ctx, d: d, st: st, opts: opts, ready: *readyTimeout, ledger: sharedLedger(st), bin: binPath}
	rt.settings = &modelSettings{env: env, args: args, presets: *f.presets, pins: pins, idle: *idle, rules: &note.Rules}
	pool, err := rt.startPool(env, *dir, *queue)
	if err != nil {
		return err
	}
	go rt.settings.watch(ctx, rt)
	// llama-servers left running by a headroom that was killed hold
	// memory that no one can give back; end them now rather than at the
	// first load.
	launch.ReapOrphans(ctx, rt.ledger, func(format string, args ...any) {
		fmt.Fprintf(env.Stderr, "headroom serve-api: %s\n", term.Text(fmt.Sprintf(format, args...)))
	})
	cfg := server.Config{Machine: snapshots.recent, Catalog: d.Catalog, Lock: d.Lock, Open: rt.open, Project: rt.project, Runtime: rt, Pool: pool, Rules: &note.Rules, Search: &rt.opts,
		Local: rt.inStore, HideRemote: *f.hideRemote,
		Calibration: (&calibrationMemo{env: env}).get}
	ln, h, banner, err := listenAPI(env, cfg, apiListen{addr: *addr, remote: *remote, token: tok, tokenOnCLI: *token != "", tokenGiven: *token != "" || *tokenFile != ""})
	if err != nil {
		pool.Close(ctx)
		return err
	}
	fmt.Fprint(env.Stdout, banner)
	return serveHTTP(ctx, ln, server.NewHTTPServer(ctx, h, server.DefaultLimits(), env.Stderr), rt)
}

// startPool makes the pool of served models: --models-dir's files and
// the pinned ones, loaded on demand.
func (rt *apiRuntime) startPool(env Env, dir string, queue int) (*server.Pool, error) {
	if dir != "" {
		var err error
		if rt.dir, err = modelsDir(dir); err != nil {
			return nil, err
		}
	}
	if queue < 1 {
		return nil, usagef("--queue %d: want at least 1", queue)
	}
	served, err := rt.settings.models(rt)
	if err != nil {
		return nil, err
	}
	rt.pool = server.NewPool(server.PoolConfig{Loader: launchLoader{rt}, Models: served, Accept: rt.checkRef, Canonical: rt.canonical, Idle: rt.settings.idle, Queue: queue,
		Log: func(line string) { fmt.Fprintf(env.Stderr, "headroom serve-api: %s\n", term.Text(line)) }})
	return rt.pool, nil
}

// apiListen is where serve-api listens and with which token.
type apiListen struct {
	addr       string
	remote     bool
	token      string // "" generates one where one is needed
	tokenOnCLI bool   // --token was used, which ps shows
	tokenGiven bool   // --token or --token-file was used
}

// listenAPI opens the API's listener and builds its handler: on loopback
// without a token, beyond it only with --allow-remote and then always with
// one. It returns the banner to print.
func listenAPI(env Env, cfg server.Config, o apiListen) (net.Listener, http.Handler, string, error) {
	h, err := server.New(cfg)
	if err != nil {
		return nil, nil, "", err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return nil, nil, "", err
	}
	if isLoopback(ln.Addr()) {
		if o.tokenGiven {
			ln.Close()
			return nil, nil, "", usagef("--token and --token-file are for --allow-remote; on loopback the API checks Host and Origin instead")
		}
		return ln, h, fmt.Sprintf("headroom API and panel on http://%s/\n", ln.Addr()), nil
	}
	if !o.remote {
		ln.Close()
		return nil, nil, "", usagef("--addr %s listens beyond loopback (%s), where anyone who reaches it could load models; add --allow-remote to mean it (a token is then required)", o.addr, ln.Addr())
	}
	tok := o.token
	if tok == "" {
		tok = rand.Text()
	}
	if o.tokenOnCLI {
		fmt.Fprintln(env.Stderr, "headroom serve-api: WARNING: --token is visible to every user of this machine (ps, /proc); use --token-file or $HEADROOM_API_TOKEN")
	}
	cfg.Token = tok
	if h, err = server.New(cfg); err != nil {
		ln.Close()
		return nil, nil, "", err
	}
	fmt.Fprintf(env.Stderr, "headroom serve-api: WARNING: listening on %s, beyond loopback; anyone on this network with the token can load and unload models, and the traffic is not encrypted\n", ln.Addr())
	return ln, h, fmt.Sprintf("headroom API and panel on http://%s/#token=%s\n  API token: %s (send it as Authorization: Bearer TOKEN)\n", ln.Addr(), tok, tok), nil
}

// minTokenLen is the shortest API token serve-api takes: anyone who can
// reach the port may try tokens, and a short one falls to guessing.
const minTokenLen = 16

// childFlags refuses the passed-through flags serve-api sets on its
// servers itself: each listens on a loopback port of its own, named by
// its model, and answers the API's requests without a key of its own
// (the API is the one to protect, with --token).
func childFlags(l llamaflags.Line) error {
	for _, a := range l.Pass {
		switch a.Key() {
		case "--host", "--port", "--path", "--api-prefix", "--alias", "--api-key", "--api-key-file", "--ssl-key-file", "--ssl-cert-file", "--reuse-port":
			return usagef("%s: serve-api sets it on the llama-servers it starts (each on a loopback port of its own, named by its model, reached without a key): protect the API with --token", a.Typed)
		}
	}
	return nil
}

// apiToken is the token a request must send with --allow-remote: from
// --token-file, --token or, with remote, $HEADROOM_API_TOKEN; "" when none
// is given (one is generated). A token is refused when it is short or
// holds a byte no Authorization header carries (a pasted line break).
func apiToken(env Env, flagTok, file string, remote bool) (string, error) {
	tok, from := flagTok, "--token"
	switch {
	case flagTok != "" && file != "":
		return "", usagef("--token and --token-file both give the token; use one (--token-file keeps it out of ps)")
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("reading the API token: %w", err)
		}
		// An editor's final newline is not part of the token.
		tok, from = strings.TrimRight(string(b), "\r\n"), "--token-file "+file
		if tok == "" {
			return "", fmt.Errorf("the API token file %s is empty; want a token of at least %d characters", file, minTokenLen)
		}
	case flagTok == "" && remote:
		tok, from = env.Getenv("HEADROOM_API_TOKEN"), "$HEADROOM_API_TOKEN"
	}
	if tok == "" {
		return "", nil
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c <= ' ' || c >= 0x7f {
			return "", usagef("the API token from %s has a byte 0x%02x at %d of %d; a token is printable ASCII without spaces or line breaks", from, c, i+1, len(tok))
		}
	}
	if len(tok) < minTokenLen {
		return "", usagef("the API token from %s has %d characters; at least %d are needed, since anyone who reaches the port may guess a short one (leave it out and serve-api generates one of 26)", from, len(tok), minTokenLen)
	}
	return tok, nil
}

// serveHTTP serves the API until ctx ends, then stops every model it
// loaded and shuts the server down.
func serveHTTP(ctx context.Context, ln net.Listener, srv *http.Server, rt *apiRuntime) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	// The children first: their answers in flight end with them. Then a
	// few seconds for the handlers to finish, and every connection left
	// (a client that stopped reading) is closed: SIGTERM ends serve-api
	// within seconds whatever its clients do.
	rt.stopAll(stopCtx)
	shut, cancelShut := context.WithTimeout(stopCtx, 3*time.Second)
	defer cancelShut()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, http.ErrServerClosed) {
		srv.Close()
	}
	return nil
}

// names collects a flag that may be given more than once.
type names []string

func (n *names) String() string { return strings.Join(*n, ",") }

func (n *names) Set(s string) error {
	*n = append(*n, s)
	return nil
}

// isLoopback reports whether a listener is reachable from this machine
// only.
func isLoopback(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// snapshotCache answers requests from a recent snapshot of this machine:
// a probe asks the drivers and measures nothing, but dozens of panel
// requests a second need not each run one. Admission asks for a fresh
// one.
type snapshotCache struct {
	env         Env
	machine     string
	llamaServer string // asked for its devices; "" for the one on PATH
	ttl         time.Duration

	mu    sync.Mutex
	snap  *hw.Snapshot
	taken time.Time
	// measured keeps the first probe's bandwidth figures: measuring takes
	// a second of memory traffic, and they do not change between probes.
	measured map[string]hw.Domain
}

// probe takes a snapshot, measuring bandwidth only the first time.
func (c *snapshotCache) probe(ctx context.Context) (*hw.Snapshot, error) {
	if c.machine != "" {
		return hw.LoadMachine(c.machine)
	}
	if c.measured == nil {
		s, err := loadMachine(ctx, c.env, "", c.llamaServer)
		if err != nil {
			return nil, err
		}
		c.measured = map[string]hw.Domain{}
		for _, d := range s.Domains {
			c.measured[d.ID] = d
		}
		return s, nil
	}
	s, err := hw.Probe(ctx, hw.ProbeOptions{LlamaServer: c.llamaServer})
	if err != nil {
		return nil, err
	}
	for i := range s.Domains {
		d := &s.Domains[i]
		if m, ok := c.measured[d.ID]; ok && d.BandwidthGBps == 0 {
			d.BandwidthGBps, d.BandwidthSource = m.BandwidthGBps, m.BandwidthSource
		}
	}
	return s, nil
}

func (c *snapshotCache) recent(ctx context.Context) (*hw.Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap != nil && time.Since(c.taken) < c.ttl {
		return c.snap, nil
	}
	s, err := c.probe(ctx)
	if err != nil {
		return nil, err
	}
	c.snap, c.taken = s, time.Now()
	return s, nil
}

func (c *snapshotCache) fresh(ctx context.Context) (*hw.Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.probe(ctx)
	if err != nil {
		return nil, err
	}
	c.snap, c.taken = s, time.Now()
	return s, nil
}
