package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultHost is the address llama-server listens on unless told
// otherwise: loopback, so a model is not served to the network by accident.
const DefaultHost = "127.0.0.1"

// DefaultGrace is how long Stop waits after SIGTERM (or a router's word to
// a ready router's child) before SIGKILL.
// llama-server finishes its in-flight requests on SIGTERM; ten seconds is
// plenty for that and short enough for a person waiting on Ctrl-C.
const DefaultGrace = 10 * time.Second

// Options say how to start llama-server.
type Options struct {
	// Bin is the llama-server executable (see Find).
	Bin string
	// Args are the planned flags. They must not set the model, host or
	// port: Start passes those from Model, Host and Port.
	Args []string
	// Model is the GGUF path passed with -m.
	Model string
	// Host is the listen address; DefaultHost when empty.
	Host string
	// Port is the listen port; 0 picks a free one.
	Port int
	// Log, when set, receives a copy of the child's stdout and stderr,
	// line by line.
	Log io.Writer
	// Env holds variables added to this process's environment for the
	// child (a later entry overrides an earlier one of the same name).
	Env []string
	// Grace is how long Stop waits after asking the child to stop;
	// DefaultGrace when zero.
	Grace time.Duration
	// OnState, when set, is called on every change of state, one call at a
	// time and in order. It may call the Server's getters but must not
	// wait for the server to stop.
	OnState func(State)
	// OnProgress, when set, hears how far the load has come, as
	// llama-server tells its router (LoadProgress). The server is then
	// started as a router's child would be: it reports its progress on
	// its standard output, and exits when its standard input closes,
	// which Start holds open until it exits (so a headroom that is
	// killed takes its servers with it once they are loaded).
	OnProgress func(LoadProgress)
}

// LoadProgress is how far a load has come: the stage llama-server names
// (text_model, mmproj_model, spec_model) and its fraction, 0 to 1; -1
// for a stage it gives no figure for.
type LoadProgress struct {
	Stage string
	Value float64
}

// Server is a running llama-server.
type Server struct {
	opts   Options
	url    string
	cmd    *exec.Cmd
	client *http.Client
	log    logBook

	exited   chan struct{} // closed once the child is reaped
	logDone  chan struct{} // closed once its output has been read to the end
	exitErr  error         // set before exited is closed
	exitCode int           // likewise

	stateMu  sync.Mutex
	state    State
	notifyMu sync.Mutex // serializes OnState calls

	stopMu   sync.Mutex
	stopping bool
	stopErr  error
	stopDone chan struct{}
	// stdin is the write end of the child's standard input where
	// OnProgress made it a router's child; closed when it exits.
	stdin *os.File
	// listening is set once a router's child has said it is ready: from
	// then on a thread of its reads the router's word on stdin.
	listening atomic.Bool
}

// Start starts llama-server with -m Model --host Host --port Port and then
// Args, in its own process group so that Stop reaches anything it spawns.
// The server starts in StateLoading; call WaitReady to learn when it
// serves. Cancelling ctx stops the child as Stop does.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Bin == "" {
		return nil, errors.New("engine.Start: Options.Bin is empty: want the llama-server path (see engine.Find)")
	}
	if o.Model == "" {
		return nil, errors.New("engine.Start: Options.Model is empty: want the GGUF file to pass with -m")
	}
	if err := checkArgs(o.Args); err != nil {
		return nil, err
	}
	if o.Host == "" {
		o.Host = DefaultHost
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("engine.Start: %w", err)
	}
	if o.Port == 0 {
		p, err := freePort(ctx, probeHost(o.Host))
		if err != nil {
			return nil, err
		}
		o.Port = p
	} else if o.Port < 0 || o.Port > 65535 {
		return nil, fmt.Errorf("engine.Start: port %d: want 0 (pick one) or 1-65535", o.Port)
	}

	args := append([]string{"-m", o.Model, "--host", o.Host, "--port", strconv.Itoa(o.Port)}, o.Args...)
	if !setsVerbosity(o.Args) {
		// llama.cpp prints its buffer sizes at verbosity 4 (libllama's INFO
		// lines); llama-server's default of 3 hides them, and Reconcile
		// would see none. They are printed once, at load.
		args = append(args, "-lv", strconv.Itoa(BufferVerbosity))
	}
	cmd := exec.Command(o.Bin, args...)
	env := o.Env
	var stdin *os.File
	if o.OnProgress != nil {
		// llama-server reports its load to a router when this is set
		// (server_child::is_child); the port itself is not used.
		env = append(slices.Clone(env), routerPortEnv+"=0")
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("engine.Start: creating the input pipe: %w", err)
		}
		cmd.Stdin, stdin = r, w
		defer r.Close()
	}
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	setProcessGroup(cmd)
	// One pipe for both streams keeps stdout and stderr lines in the order
	// the child wrote them.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("engine.Start: creating the log pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		if stdin != nil {
			stdin.Close()
		}
		return nil, fmt.Errorf("engine.Start: starting %s: %w", o.Bin, err)
	}
	pw.Close()

	s := &Server{
		opts:     o,
		url:      "http://" + net.JoinHostPort(probeHost(o.Host), strconv.Itoa(o.Port)),
		cmd:      cmd,
		client:   &http.Client{Transport: transport(o.Args)},
		exited:   make(chan struct{}),
		logDone:  make(chan struct{}),
		exitCode: -1,
		stopDone: make(chan struct{}),
		stdin:    stdin,
	}
	s.setState(StateLoading)
	go s.readLog(pr)
	go s.reap()
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Stop(context.Background())
		case <-s.exited:
		}
	}()
	return s, nil
}

// transport is the one Start's requests go by: without keep-alives, and
// with the server's API key where args give one.
func transport(args []string) http.RoundTripper {
	t := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	if k := apiKeyOf(args); k != "" {
		return keyed{t, k}
	}
	return t
}

// checkArgs refuses flags Start sets itself: passed twice, llama-server
// would take the last, and the URL Start probes would be wrong.
func checkArgs(args []string) error {
	owned := map[string]string{"-m": "Model", "--model": "Model", "--host": "Host", "--port": "Port"}
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if field, ok := owned[name]; ok {
			return fmt.Errorf("engine.Start: Args sets %s: want it in Options.%s instead", name, field)
		}
	}
	return nil
}

// BufferVerbosity is the llama.cpp log verbosity (-lv) at which the
// buffer-size lines are printed; Start passes it unless Args set one.
const BufferVerbosity = 4

// setsVerbosity reports whether args choose a log verbosity themselves.
func setsVerbosity(args []string) bool {
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		switch name {
		case "-lv", "--verbosity", "--log-verbosity", "-v", "--verbose", "--log-verbose":
			return true
		}
	}
	return false
}

// probeHost is the address to reach a server listening on host: the
// wildcard addresses are reached through loopback.
func probeHost(host string) string {
	switch strings.Trim(host, "[]") {
	case "0.0.0.0", "":
		return "127.0.0.1"
	case "::":
		return "::1"
	}
	return strings.Trim(host, "[]")
}

// freePort asks the system for a free port on host. Another process may
// take it before llama-server binds it; llama-server then exits with
// "couldn't bind", which WaitReady reports.
func freePort(ctx context.Context, host string) (int, error) {
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("engine.Start: finding a free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) readLog(r io.ReadCloser) {
	defer close(s.logDone)
	defer r.Close()
	tee := s.opts.Log
	readLines(r, func(line string) {
		if p, ok := routerLine(line); ok {
			if p != nil && p.Stage == StageLoaded {
				s.listening.Store(true)
			}
			if p != nil && s.opts.OnProgress != nil {
				s.opts.OnProgress(*p)
			}
			return
		}
		s.log.add(line)
		if tee != nil {
			if _, err := io.WriteString(tee, line+"\n"); err != nil {
				tee = nil // a broken copy must not stop the log being read
			}
		}
	})
}

func (s *Server) reap() {
	err := s.cmd.Wait()
	if s.stdin != nil {
		s.stdin.Close()
	}
	s.exitErr = err
	s.exitCode = s.cmd.ProcessState.ExitCode()
	close(s.exited)
	if !s.stopRequested() {
		// An exit nobody asked for is a failure, whether it comes while
		// loading or after the model was ready.
		s.setState(StateFailed)
	}
}

// URL is the server's base URL, for example http://127.0.0.1:8080.
func (s *Server) URL() string { return s.url }

// PID is the child's process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// ProcessGroup is the process group the child leads (its PID), or 0 where
// the system has no process groups.
func (s *Server) ProcessGroup() int { return processGroup(s.cmd.Process.Pid) }

// Args are the arguments the child was started with, after the program.
func (s *Server) Args() []string { return append([]string(nil), s.cmd.Args[1:]...) }

// State is the server's current state; it is safe to call at any time.
func (s *Server) State() State {
	s.stateMu.Lock()
	defer s.stateMu.Unlock()
	return s.state
}

func (s *Server) setState(st State) {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	if st == StateReady {
		select {
		case <-s.exited:
			return // it exited just after proving itself: that is a failure
		default:
		}
	}
	s.stateMu.Lock()
	if s.state == st {
		s.stateMu.Unlock()
		return
	}
	s.state = st
	s.stateMu.Unlock()
	if s.opts.OnState != nil {
		s.opts.OnState(st)
	}
}

// Logged returns the buffers llama.cpp has reported allocating so far.
func (s *Server) Logged() []Logged { return s.log.logged() }

// LogTail returns the last n lines of the child's output (all lines kept,
// up to TailLines, when n <= 0).
func (s *Server) LogTail(n int) []string { return s.log.tail(n) }

// Exited is closed when the child has exited.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// Wait waits for the child to exit. It returns nil when the child exited
// with status 0 or was ended by Stop (or by cancelling Start's context),
// and the exit error otherwise.
func (s *Server) Wait() error {
	<-s.exited
	if s.stopRequested() {
		return nil
	}
	if s.exitErr != nil {
		return fmt.Errorf("llama-server (pid %d): %w", s.cmd.Process.Pid, s.exitErr)
	}
	return nil
}

func (s *Server) stopRequested() bool {
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	return s.stopping
}

// Stop ends the server: SIGTERM to its process group (a ready router's
// child is told on its input instead, as llama-server's router tells it),
// then SIGKILL if it has not exited after Options.Grace. It returns once
// the child is reaped, or with ctx's error if ctx ends first. Calling it
// again, or after the child exited, is harmless.
func (s *Server) Stop(ctx context.Context) error {
	s.stopMu.Lock()
	first := !s.stopping
	s.stopping = true
	s.stopMu.Unlock()
	if first {
		go s.stop()
	}
	select {
	case <-s.stopDone:
		s.stopMu.Lock()
		defer s.stopMu.Unlock()
		return s.stopErr
	case <-ctx.Done():
		return fmt.Errorf("stopping llama-server (pid %d): %w", s.cmd.Process.Pid, ctx.Err())
	}
}

// stop runs once, detached from any caller's context, so a Stop that gives
// up waiting still leaves the child killed and reaped.
func (s *Server) stop() {
	defer close(s.stopDone)
	defer s.client.CloseIdleConnections()
	select {
	case <-s.exited:
		return
	default:
	}
	var err error
	if s.stdin != nil {
		// A router's child reads the router's word on its input once it
		// is ready, and stops on it; while it loads, only a signal stops
		// it (its handler is not yet installed, so SIGTERM ends it at
		// once). A child gone already fails the write.
		_, werr := io.WriteString(s.stdin, routerExit+"\n")
		// A ready one gets no signal, as llama-server's own router sends
		// none (server-models.cpp): its handler runs the shutdown inside
		// whichever thread the signal lands on, taking the task queue's
		// mutex, and that thread may hold it already; a stop then hangs
		// until the SIGKILL. Told on its input alone, it ends its answers
		// in flight and exits (measured: 0.11-0.17 s with a stream open).
		// Nothing is signalled once it has exited: its group id may name
		// another process by then.
		if werr != nil || !s.listening.Load() {
			err = terminate(s.cmd.Process)
		}
	} else {
		err = terminate(s.cmd.Process)
	}
	t := time.NewTimer(s.opts.Grace)
	defer t.Stop()
	select {
	case <-s.exited:
	case <-t.C:
		if e := kill(s.cmd.Process); e != nil {
			err = e
		}
		<-s.exited
	}
	// The reader ends when the last holder of the pipe is gone: soon,
	// the child having exited and its group been signalled (if it was),
	// but a stuck grandchild must not hang Stop.
	select {
	case <-s.logDone:
	case <-time.After(2 * time.Second):
	}
	if err != nil {
		s.stopMu.Lock()
		s.stopErr = fmt.Errorf("stopping llama-server (pid %d): %w", s.cmd.Process.Pid, err)
		s.stopMu.Unlock()
	}
}
