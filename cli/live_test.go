package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/synth"
)

// The live tests run headroom against the real llama-server: the one
// HEADROOM_LLAMA_SERVER names (CI builds it with conformance/engine.sh
// cpu). Without it they skip, unless HEADROOM_REQUIRE_ENGINE=1 says the
// run must have one.

// TestMain lets a test run this binary as the headroom command itself
// (HEADROOM_CLI_CHILD=1, arguments after "--"), so a test can signal a real
// headroom process.
func TestMain(m *testing.M) {
	if os.Getenv("HEADROOM_CLI_CHILD") == "1" {
		args := os.Args[1:]
		for i, a := range args {
			if a == "--" {
				args = args[i+1:]
				break
			}
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Main(ctx, args, Env{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv})
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func liveEngine(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("HEADROOM_LLAMA_SERVER")
	if bin == "" {
		if os.Getenv("HEADROOM_REQUIRE_ENGINE") == "1" {
			t.Fatal("HEADROOM_REQUIRE_ENGINE=1 but HEADROOM_LLAMA_SERVER names no llama-server (conformance/engine.sh cpu builds one)")
		}
		t.Skip("no real llama-server: set HEADROOM_LLAMA_SERVER (conformance/engine.sh cpu builds one)")
	}
	return bin
}

// liveEnv is a headroom environment whose store, caches and ledger live
// in a temporary directory.
func liveEnv(t *testing.T, stdout, stderr *bytes.Buffer) Env {
	dir := t.TempDir()
	vars := map[string]string{
		"HOME": dir, "XDG_CACHE_HOME": filepath.Join(dir, "cache"), "XDG_DATA_HOME": filepath.Join(dir, "data"),
		"HEADROOM_STORE": filepath.Join(dir, "store"), "HF_HUB_OFFLINE": "1", "PATH": os.Getenv("PATH"),
	}
	return Env{Stdout: stdout, Stderr: stderr, Getenv: func(k string) string { return vars[k] }}
}

// writeShape writes a sparse synthetic GGUF of a real architecture.
func writeShape(t testing.TB, dir, shape string, q synth.Quant) string {
	t.Helper()
	return writeSynth(t, dir, shape, "", q)
}

// writeSynth writes a synth shape, under another architecture's name when
// as is not "".
func writeSynth(t testing.TB, dir, shape, as string, q synth.Quant) string {
	t.Helper()
	s, ok := synth.Lookup(shape)
	if !ok {
		t.Fatalf("no synth shape %s", shape)
	}
	b, err := synth.Build(s, q)
	if err != nil {
		t.Fatal(err)
	}
	name := shape + "." + string(q) + ".gguf"
	if as != "" {
		if err := b.RenameArchitecture(as); err != nil {
			t.Fatal(err)
		}
		name = shape + "-as-" + as + "." + string(q) + ".gguf"
	}
	path := filepath.Join(dir, name)
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLiveServeCheck is `headroom serve MODEL --check` with the real
// llama-server, at plan defaults, for one model of each kind headroom
// models: it must load, answer a completion, and log every buffer within
// the accounting bounds of the plan.
func TestLiveServeCheck(t *testing.T) {
	bin := liveEngine(t)
	models := t.TempDir()
	for _, tc := range []struct {
		kind, shape string
		q           synth.Quant
	}{
		{"dense", "tinyllama-1.1b", synth.Q4_K_M},
		{"sliding window", "gemma-3-1b", synth.Q8_0},
		{"recurrent", "mamba2-130m", synth.Q8_0},
		{"hybrid", "lfm2-350m", synth.Q8_0},
		{"mixture of experts", "qwen1.5-moe-a2.7b", synth.Q5_K_M},
		{"MLA", "deepseek-v2-lite", synth.Q5_K_M},
		{"gated DeltaNet", "qwen3.5-0.8b", synth.Q8_0},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			path := writeShape(t, models, tc.shape, tc.q)
			var out, errOut bytes.Buffer
			env := liveEnv(t, &out, &errOut)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			start := time.Now()
			code := Main(ctx, []string{"serve", path, "--check", "--llama-server", bin}, env)
			t.Logf("%s %s: exit %d in %s\n%s", tc.shape, tc.q, code, time.Since(start).Round(time.Millisecond), out.String())
			if code != 0 || !strings.Contains(out.String(), "check passed") {
				t.Fatalf("serve --check failed (exit %d):\n%s\n%s", code, out.String(), errOut.String())
			}
			for _, want := range []string{"CPU_", "compute", "equal"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("the comparison lacks %q", want)
				}
			}
			// Before the load, llama.cpp's own projection of the plan
			// (llama-fit-params beside the engine) was asked and agreed.
			if !strings.Contains(errOut.String(), "llama.cpp's own projection") {
				t.Errorf("no engine check before the load:\n%s", errOut.String())
			}
		})
	}
}

// recordingEngine is a llama-server wrapper that logs each invocation's
// arguments to a file before running the real one, so a test can see
// whether headroom started a load at all. limitKiB, when positive, caps
// the engine's virtual memory (ulimit -v).
func recordingEngine(t *testing.T, bin string, limitKiB int) (wrapper, logPath string) {
	dir := t.TempDir()
	logPath = filepath.Join(dir, "invocations")
	wrapper = filepath.Join(dir, "llama-server")
	limit := ""
	if limitKiB > 0 {
		limit = fmt.Sprintf("case \" $* \" in *' -m '*) ulimit -v %d;; esac\n", limitKiB)
	}
	script := fmt.Sprintf("#!/bin/sh\necho \"$*\" >> %q\n%sexec %q \"$@\"\n", logPath, limit, bin)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper, logPath
}

// TestLiveTooBigNeverStarts serves a model far larger than this machine:
// headroom must refuse it from the header alone, and llama-server must
// never be asked to load it.
func TestLiveTooBigNeverStarts(t *testing.T) {
	bin := liveEngine(t)
	wrapper, invocations := recordingEngine(t, bin, 0)
	path := writeShape(t, t.TempDir(), "llama-3.1-70b", synth.F16)
	var out, errOut bytes.Buffer
	env := liveEnv(t, &out, &errOut)
	code := Main(context.Background(), []string{"serve", path, "--check", "--llama-server", wrapper}, env)
	if code == 0 {
		t.Fatalf("a 141 GB model was served on this machine:\n%s", out.String())
	}
	if !strings.Contains(errOut.String(), "does not fit") && !strings.Contains(errOut.String(), "does_not_fit") {
		t.Errorf("the refusal does not say it does not fit:\n%s", errOut.String())
	}
	data, _ := os.ReadFile(invocations)
	if strings.Contains(string(data), "-m ") {
		t.Errorf("llama-server was started although the model does not fit:\n%s", data)
	}
}

// TestLiveOutOfMemoryAtInit starts a load whose allocations the operating
// system refuses (a virtual-memory cap on llama-server alone): headroom
// must report out_of_memory_at_init and leave nothing running.
func TestLiveOutOfMemoryAtInit(t *testing.T) {
	bin := liveEngine(t)
	// Under 1.4 GB of address space the file maps in (636 MiB) but the
	// 455 MiB of repacked Q4_K weights do not (measured on the 2-core CI
	// machine: 1.2 and 1.4 GB fail there, 1.6 GB fails at the compute
	// buffer, 0.9 GB already at the mapping, which is no allocation
	// failure of the model's buffers).
	wrapper, _ := recordingEngine(t, bin, 1400000)
	path := writeShape(t, t.TempDir(), "tinyllama-1.1b", synth.Q4_K_M)
	var out, errOut bytes.Buffer
	env := liveEnv(t, &out, &errOut)
	code := Main(context.Background(), []string{"serve", path, "--check", "--llama-server", wrapper, "--parallel", "1"}, env)
	if code == 0 {
		t.Fatalf("the load succeeded under the cap:\n%s", out.String())
	}
	if !strings.Contains(errOut.String(), "out of memory at init") {
		t.Errorf("the failure is not classified as out of memory at init:\n%s", errOut.String())
	}
	if pids := enginesServing(t, path); len(pids) > 0 {
		t.Errorf("llama-server processes left behind: %v", pids)
	}
}

// TestLiveInterruptStopsEngine runs headroom serve as a real process, waits
// until the model is ready, sends SIGINT, and checks that no llama-server
// serving the model is left.
// TestLiveInterruptStopsEngine: serve passes the flags it does not model
// through to llama-server (an API key among them: a request without it
// is answered 401, one with it 200, and serve's own readiness completion
// sent it), and SIGINT stops llama-server with serve.
func TestLiveInterruptStopsEngine(t *testing.T) {
	bin := liveEngine(t)
	path := writeShape(t, t.TempDir(), "tinyllama-1.1b", synth.Q4_K_M)
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "--", "serve", path, "--llama-server", bin, "--port", strconv.Itoa(port), "--parallel", "1",
		"--api-key", "secret123", "--jinja", "-t", "1")
	cmd.Env = append(os.Environ(), "HEADROOM_CLI_CHILD=1", "HEADROOM_STORE="+filepath.Join(dir, "store"),
		"XDG_CACHE_HOME="+filepath.Join(dir, "cache"), "HF_HUB_OFFLINE=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for !strings.Contains(out.String(), "ready: ") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("not ready in time:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if pids := enginesServing(t, path); len(pids) != 1 {
		t.Errorf("while serving, %d llama-server processes serve the model, want 1", len(pids))
	}
	if !strings.Contains(out.String(), "passed through to llama-server (no effect on memory): --api-key *** --jinja -t 1") {
		t.Errorf("serve did not say what it passed through:\n%s", out.String())
	}
	for key, want := range map[string]int{"": http.StatusUnauthorized, "wrong": http.StatusUnauthorized, "secret123": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/v1/models", port), nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /v1/models with key %q: %d, want %d", key, resp.StatusCode, want)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("headroom serve exited with %v after SIGINT:\n%s", err, out.String())
		}
	case <-time.After(45 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("headroom serve did not stop within 45 s of SIGINT:\n%s", out.String())
	}
	if pids := enginesServing(t, path); len(pids) > 0 {
		t.Errorf("llama-server processes left behind after SIGINT: %v", pids)
	}
}

// enginesServing lists the processes whose command line names the model
// file with -m.
func enginesServing(t testing.TB, model string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc to look for processes: %v", err)
	}
	var pids []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-m" && args[i+1] == model {
				// A zombie has exited already; it holds no memory.
				if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && strings.Contains(string(stat), ") Z ") {
					break
				}
				pids = append(pids, e.Name())
				break
			}
		}
	}
	return pids
}
