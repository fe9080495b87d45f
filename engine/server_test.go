package engine

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/engine/enginetest"
)

// stateLog records OnState calls.
type stateLog struct {
	mu     sync.Mutex
	states []State
}

func (l *stateLog) add(s State) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.states = append(l.states, s)
}

func (l *stateLog) get() []State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.states)
}

// startFake starts the stand-in in a mode and stops it when the test ends.
func startFake(t *testing.T, o Options, mode string, env ...string) *Server {
	t.Helper()
	o.Bin = fakeBin
	if o.Model == "" {
		o.Model = filepath.Join(t.TempDir(), "model.gguf")
	}
	o.Env = append([]string{"FAKE_LLAMA_MODE=" + mode, "FAKE_LLAMA_LOAD_MS=50"}, env...)
	s, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	return s
}

func TestReadyGood(t *testing.T) {
	t.Parallel()
	argv := filepath.Join(t.TempDir(), "argv.json")
	var states stateLog
	var tee enginetest.Buffer
	model := filepath.Join(t.TempDir(), "m.gguf")
	s := startFake(t, Options{Model: model, Args: []string{"-c", "8192", "-ngl", "99", "--flash-attn", "on"},
		Log: &tee, OnState: states.add}, "good", "FAKE_LLAMA_ARGV="+argv)
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Errorf("URL %q, want http://127.0.0.1:PORT", s.URL())
	}
	if err := s.WaitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if s.State() != StateReady {
		t.Errorf("state %q after WaitReady, want ready", s.State())
	}
	if got, want := states.get(), []State{StateLoading, StateReady}; !reflect.DeepEqual(got, want) {
		t.Errorf("OnState saw %v, want %v", got, want)
	}

	data, err := os.ReadFile(argv)
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	if err := json.Unmarshal(data, &args); err != nil {
		t.Fatal(err)
	}
	port := s.URL()[strings.LastIndexByte(s.URL(), ':')+1:]
	// -lv 4 makes llama.cpp print its buffer sizes, which llama-server's
	// default verbosity hides.
	want := []string{"-m", model, "--host", "127.0.0.1", "--port", port, "-c", "8192", "-ngl", "99", "--flash-attn", "on", "-lv", "4"}
	if !reflect.DeepEqual(args, want) {
		t.Errorf("llama-server got %q, want %q", args, want)
	}

	logged := s.Logged()
	wantLogged := []Logged{
		{Source: "load_tensors", Device: "CPU_Mapped", Kind: "model", MiB: 281.81, Printed: "281.81"},
		{Source: "load_tensors", Device: "CUDA0", Kind: "model", MiB: 4403.49, Printed: "4403.49"},
		{Source: "llama_context", Device: "CUDA_Host", Kind: "output", MiB: 0.49, Printed: "0.49"},
		{Source: "llama_kv_cache", Device: "CUDA0", Kind: "kv", MiB: 1024, Printed: "1024.00"},
		{Source: "sched_reserve", Device: "CUDA0", Kind: "compute", MiB: 560, Printed: "560.00"},
		{Source: "sched_reserve", Device: "CUDA_Host", Kind: "compute", MiB: 24.01, Printed: "24.01"},
	}
	if !reflect.DeepEqual(logged, wantLogged) {
		t.Errorf("Logged() = %+v\nwant %+v", logged, wantLogged)
	}
	tail := s.LogTail(0)
	if !slices.ContainsFunc(tail, func(l string) bool { return strings.HasPrefix(l, "build: 6789") }) {
		t.Errorf("the line printed on stdout is missing from the log tail: %q", tail)
	}
	if got := s.LogTail(2); len(got) != 2 || got[1] != tail[len(tail)-1] {
		t.Errorf("LogTail(2) = %q, want the last two of %q", got, tail)
	}
	if !strings.Contains(tee.String(), "model buffer size") {
		t.Errorf("Options.Log did not get the log: %q", tee.String())
	}
}

// TestFailures runs each way the stand-in fails and checks the reason,
// the state, and what the failure carries.
func TestFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode     string
		timeout  time.Duration
		reason   Reason
		exitCode int
		detail   []string // substrings of Detail
	}{
		{"init-oom", 10 * time.Second, ReasonOutOfMemory, 1, []string{"status 1", "cudaMalloc failed: out of memory"}},
		{"broken-health", 10 * time.Second, ReasonOutOfMemory, -1, []string{"answered 500", "backend is in error state", "cudaMalloc failed"}},
		{"broken-completion", 10 * time.Second, ReasonCompletionFailed, -1, []string{"GET /health answered 200", "POST /completion answered 500", "failed to decode the batch"}},
		{"error-exit", 10 * time.Second, ReasonEngineError, 1, []string{"error loading model", "unknown pre-tokenizer"}},
		{"silent-exit", 10 * time.Second, ReasonEngineExited, 3, []string{"status 3"}},
		{"never-ready", 600 * time.Millisecond, ReasonNotReadyInTime, -1, []string{"not serving after 600ms", "503"}},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			var states stateLog
			s := startFake(t, Options{OnState: states.add}, tt.mode)
			if tt.mode == "never-ready" {
				// The short timeout is the point of the case; a stand-in
				// that has not started listening within it (a loaded CI
				// machine) would test the start, not the 503s.
				waitListening(t, s.URL()+"/health")
			}
			start := time.Now()
			err := s.WaitReady(context.Background(), tt.timeout)
			var f *Failure
			if !errors.As(err, &f) {
				t.Fatalf("WaitReady: %v, want a *Failure", err)
			}
			if f.Reason != tt.reason || f.ExitCode != tt.exitCode {
				t.Errorf("reason %s, exit code %d; want %s, %d (%s)", f.Reason, f.ExitCode, tt.reason, tt.exitCode, f.Detail)
			}
			for _, d := range tt.detail {
				if !strings.Contains(f.Detail, d) {
					t.Errorf("detail %q lacks %q", f.Detail, d)
				}
			}
			if f.State != StateFailed || s.State() != StateFailed {
				t.Errorf("failure state %q, server state %q; want failed", f.State, s.State())
			}
			if got := states.get(); got[len(got)-1] != StateFailed || got[0] != StateLoading {
				t.Errorf("OnState saw %v, want loading ... failed", got)
			}
			if tt.mode != "silent-exit" && len(f.LogTail) == 0 {
				t.Error("the failure carries no log")
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, string(tt.reason)) {
				t.Errorf("Error() = %q, want one line naming %s", msg, tt.reason)
			}
			if tt.reason == ReasonNotReadyInTime && time.Since(start) > tt.timeout+2*time.Second {
				t.Errorf("WaitReady took %s with a timeout of %s", time.Since(start), tt.timeout)
			}
		})
	}
}

// TestReplayGoldenLog serves a recorded llama.cpp load through the
// stand-in: what the server reports logging is what the harness read, and
// it reconciles with a plan equal to it.
func TestReplayGoldenLog(t *testing.T) {
	t.Parallel()
	c := loadGolden(t)[0]
	path := filepath.Join(t.TempDir(), "load.log")
	if err := os.WriteFile(path, []byte(strings.Join(c.Log, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startFake(t, Options{}, "good", "FAKE_LLAMA_LOG="+path)
	if err := s.WaitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	got := s.Logged()
	if len(got) != len(c.Figures.Buffers) {
		t.Fatalf("%d buffers logged, want %d: %+v", len(got), len(c.Figures.Buffers), got)
	}
	for i, b := range c.Figures.Buffers {
		if got[i].Device != b.DeviceOrBufferType || got[i].Kind != b.Kind || got[i].Cache != b.Cache || got[i].Printed != b.Printed {
			t.Errorf("buffer %d: %+v, want %+v", i, got[i], b)
		}
	}
	if r := Reconcile(plannedFrom(c.Figures.Buffers), got); !r.OK() {
		t.Errorf("replayed log does not reconcile with its own figures: %s", r.Summary())
	}
}

func TestWaitReadyContextCancelled(t *testing.T) {
	t.Parallel()
	s := startFake(t, Options{}, "never-ready")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := s.WaitReady(ctx, 0)
	var f *Failure
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &f) {
		t.Errorf("WaitReady with an ending context: %v, want the context's error, not a Failure", err)
	}
}

func TestStartRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"no binary", Options{Model: "m.gguf"}, "Options.Bin is empty"},
		{"no model", Options{Bin: "llama-server"}, "Options.Model is empty"},
		{"model in args", Options{Bin: "x", Model: "m", Args: []string{"-m", "other.gguf"}}, "Args sets -m"},
		{"port in args", Options{Bin: "x", Model: "m", Args: []string{"--port=9000"}}, "Args sets --port"},
		{"host in args", Options{Bin: "x", Model: "m", Args: []string{"--host", "0.0.0.0"}}, "Options.Host"},
		{"bad port", Options{Bin: "x", Model: "m", Port: 70000}, "port 70000"},
		{"missing binary", Options{Bin: filepath.Join(t.TempDir(), "nope"), Model: "m"}, "starting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Start(context.Background(), tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Start: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestStopGraceful(t *testing.T) {
	t.Parallel()
	s := startFake(t, Options{}, "good")
	if err := s.WaitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Stop took %s: SIGTERM should have ended it well within the grace", d)
	}
	if err := s.Wait(); err != nil {
		t.Errorf("Wait after Stop: %v, want nil", err)
	}
	if s.State() != StateReady {
		t.Errorf("state %q after a requested stop, want it left at ready", s.State())
	}
	if !slices.ContainsFunc(s.LogTail(0), func(l string) bool { return strings.Contains(l, "cleaning up before exit") }) {
		t.Error("the child did not log its SIGTERM shutdown: was it killed instead?")
	}
}

func TestStartContextCancelStopsChild(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Start(ctx, Options{Bin: fakeBin, Model: "m.gguf", Env: []string{"FAKE_LLAMA_MODE=never-ready"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	waited := make(chan error, 1)
	go func() { waited <- s.WaitReady(context.Background(), 0) }()
	cancel()
	select {
	case <-s.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("the child still runs 10 s after Start's context was cancelled")
	}
	if err := s.Wait(); err != nil {
		t.Errorf("Wait: %v, want nil for a stop the caller asked for", err)
	}
	select {
	case err := <-waited:
		if !errors.Is(err, ErrStopped) {
			t.Errorf("WaitReady while the caller stopped the server: %v, want ErrStopped", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitReady still waits after the server was stopped")
	}
	if s.State() != StateLoading {
		t.Errorf("state %q after a stop while loading, want it left at loading", s.State())
	}
}

func TestUnexpectedExitAfterReady(t *testing.T) {
	t.Parallel()
	var states stateLog
	s := startFake(t, Options{OnState: states.add}, "good")
	if err := s.WaitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// Something other than Stop ends the child.
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-s.Exited()
	if err := s.Wait(); err == nil {
		t.Error("Wait: nil after the child was killed from outside, want its exit error")
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.State() != StateFailed && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got, want := states.get(), []State{StateLoading, StateReady, StateFailed}; !reflect.DeepEqual(got, want) {
		t.Errorf("OnState saw %v, want %v", got, want)
	}
}

func TestStateConcurrentReads(t *testing.T) {
	t.Parallel()
	s := startFake(t, Options{}, "good")
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
					_ = s.State()
					_ = s.LogTail(5)
					_ = s.Logged()
				}
			}
		}()
	}
	err := s.WaitReady(context.Background(), 10*time.Second)
	close(done)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
}

func TestSetsVerbosity(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"-c", "4096", "-ngl", "0"}, false},
		{[]string{"-lv", "5"}, true},
		{[]string{"--verbosity=2"}, true},
		{[]string{"--log-verbosity", "4"}, true},
		{[]string{"-v"}, true},
		{[]string{"--verbose-prompt"}, false},
	} {
		if got := setsVerbosity(tt.args); got != tt.want {
			t.Errorf("setsVerbosity(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
}

// waitListening waits until url answers any HTTP status.
func waitListening(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never answered", url)
}
