package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/engine/enginetest"
	"github.com/headroom-llm/headroom/source/hubtest"
	"github.com/headroom-llm/headroom/synth"
)

// session runs a command with its own environment: a Hub, a store, a
// home, and the stand-in llama-server's mode.
type session struct {
	t    *testing.T
	vars map[string]string
}

func newSession(t *testing.T, hub *hubtest.Hub) *session {
	vars := map[string]string{"HOME": t.TempDir(), "HEADROOM_STORE": filepath.Join(t.TempDir(), "store")}
	if hub != nil {
		vars["HF_ENDPOINT"] = hub.URL
	}
	return &session{t: t, vars: vars}
}

// start runs a command in the background; wait returns its exit code.
func (s *session) start(ctx context.Context, args ...string) (out, errs *enginetest.Buffer, wait func() int) {
	for k, v := range s.vars {
		if strings.HasPrefix(k, "FAKE_LLAMA_") {
			s.t.Setenv(k, v) // the child inherits headroom's environment
		}
	}
	out, errs = &enginetest.Buffer{}, &enginetest.Buffer{}
	env := Env{Stdout: out, Stderr: errs, Getenv: func(k string) string { return s.vars[k] }}
	done := make(chan int, 1)
	go func() { done <- Main(ctx, args, env) }()
	return out, errs, func() int { return <-done }
}

func (s *session) run(args ...string) (int, string, string) {
	out, errs, wait := s.start(context.Background(), args...)
	code := wait()
	return code, out.String(), errs.String()
}

func smallHub(t *testing.T) *hubtest.Hub {
	hub := hubtest.New(t)
	hub.AddGGUF(t, "test/mamba-GGUF", "Mamba2-130M-Q8_0.gguf", "mamba2-130m", synth.Q8_0, true)
	hub.AddGGUF(t, "test/llama-70b-GGUF", "Llama-3.1-70B-Q4_K_M.gguf", "llama-3.1-70b", synth.Q4_K_M, false)
	return hub
}

func TestPullCommand(t *testing.T) {
	hub := smallHub(t)
	s := newSession(t, hub)
	code, out, errs := s.run("pull", "--machine", "m4-16", "hf:test/llama-70b-GGUF/Llama-3.1-70B-Q4_K_M.gguf")
	if code != 1 || !strings.Contains(errs, "does not fit") {
		t.Errorf("pull of a 70B (40 GiB) on a 16 GB Mac: exit %d, stderr:\n%s", code, errs)
	}
	code, out, errs = s.run("pull", "--machine", "rtx-3060-12", "hf:test/mamba-GGUF/Mamba2-130M-Q8_0.gguf")
	if code != 0 {
		t.Fatalf("pull: exit %d\n%s", code, errs)
	}
	path := strings.TrimSpace(out)
	if !strings.HasPrefix(path, s.vars["HEADROOM_STORE"]) || filepath.Base(path) != "Mamba2-130M-Q8_0.gguf" {
		t.Errorf("pull printed %q; want the installed file under the store", path)
	}
	for _, want := range []string{"resolving", "assessing", "downloading", "Mamba2-130M-Q8_0.gguf"} {
		if !strings.Contains(errs, want) {
			t.Errorf("progress lacks %q:\n%s", want, errs)
		}
	}
	code, out, _ = s.run("pull", "--quiet", "--json", "--machine", "rtx-3060-12", "hf:test/mamba-GGUF/Mamba2-130M-Q8_0.gguf")
	var j struct {
		Path     string `json:"path"`
		Manifest struct {
			Files []struct {
				Verified bool `json:"verified"`
			} `json:"files"`
		} `json:"manifest"`
	}
	if err := json.Unmarshal([]byte(out), &j); code != 0 || err != nil || j.Path != path || len(j.Manifest.Files) != 1 || !j.Manifest.Files[0].Verified {
		t.Errorf("pull --json: exit %d, %v, %s", code, err, out)
	}
}

func TestServeCommand(t *testing.T) {
	bin := enginetest.BuildFake(t)
	hub := smallHub(t)
	s := newSession(t, hub)
	s.vars["FAKE_LLAMA_MODE"] = "good"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errs, wait := s.start(ctx, "serve", "--llama-server", bin, "--machine", "cpu-32", "--port", "0",
		"hf:test/mamba-GGUF/Mamba2-130M-Q8_0.gguf")
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "ready: ") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	m := regexp.MustCompile(`ready: (http://\S+) serves`).FindStringSubmatch(out.String())
	if m == nil {
		cancel()
		wait()
		t.Fatalf("serve never said ready:\n%s\n%s", out, errs)
	}
	// The server headroom started answers.
	resp, err := http.Get(m[1] + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("GET /health of the started server: %v %v", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
	cancel()
	if code := wait(); code != 0 {
		t.Errorf("serve after Ctrl-C: exit %d\n%s", code, errs)
	}
	for _, want := range []string{"resolving", "assessing", "downloading", "loading", "stopping"} {
		if !regexp.MustCompile(`(?m)^` + want).MatchString(errs.String()) {
			t.Errorf("serve's states lack %q:\n%s", want, errs)
		}
	}
	if _, err := http.Get(m[1] + "/health"); err == nil {
		t.Error("llama-server still answers after serve stopped")
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", out, errs)

	// A crash while serving ends serve with an error, not a clean exit.
	s.vars["FAKE_LLAMA_MODE"] = "crash-after-ready"
	code, stdout, stderr := s.run("serve", "--llama-server", bin, "--machine", "cpu-32", "--port", "0", "--no-pull",
		"hf:test/mamba-GGUF/Mamba2-130M-Q8_0.gguf")
	if code != 1 || !strings.Contains(stdout, "ready: ") || !strings.Contains(stderr, "exited on its own") {
		t.Errorf("serve whose llama-server crashes after ready: exit %d\n%s\n%s", code, stdout, stderr)
	}

	s.vars["FAKE_LLAMA_MODE"] = "broken-health"
	code, _, stderr = s.run("serve", "--llama-server", bin, "--machine", "cpu-32", "--port", "0", "--no-pull",
		"hf:test/mamba-GGUF/Mamba2-130M-Q8_0.gguf")
	if code != 1 || !strings.Contains(stderr, "out_of_memory_at_init") || strings.Contains(stderr, "ready:") {
		t.Errorf("serve against a server that is healthy but cannot complete: exit %d\n%s", code, stderr)
	}
	t.Logf("broken-health stderr:\n%s", stderr)

	// serve plans for the build it starts: an --engine naming another is
	// refused before anything runs.
	code, _, stderr = s.run("serve", "--llama-server", bin, "--machine", "cpu-32", "--no-pull", "--engine", "80fb11a",
		"hf:test/mamba-GGUF/Mamba2-130M-Q8_0.gguf")
	if code != 2 || !strings.Contains(stderr, "--engine 80fb11a: figures for it would be llama.cpp 80fb11a's, but the llama-server started here is") {
		t.Errorf("serve --engine naming another build: exit %d\n%s", code, stderr)
	}
}

func TestServeAPICommand(t *testing.T) {
	s := newSession(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errs, wait := s.start(ctx, "serve-api", "--addr", "127.0.0.1:0", "--machine", "rtx-4090", "--llama-server", "/nonexistent/llama-server")
	deadline := time.Now().Add(20 * time.Second)
	re := regexp.MustCompile(`on (http://\S+)/`)
	for re.FindStringSubmatch(out.String()) == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	m := re.FindStringSubmatch(out.String())
	if m == nil {
		cancel()
		wait()
		t.Fatalf("serve-api did not say where it listens:\n%s\n%s", out, errs)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(m[1] + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/v1/models"); code != 200 || !strings.Contains(body, `"disabled_reason": "insufficient_resources"`) {
		t.Errorf("/v1/models: %d %.300s", code, body)
	}
	if code, body := get("/api/fit?model=" + filepath.Join(os.TempDir(), "x.gguf")); code != 403 {
		t.Errorf("fit of a path outside the store: %d %.300s", code, body)
	}
	resp, err := http.Post(m[1]+"/api/load", "application/json", strings.NewReader(`{"model":"qwen3-0.6b/Q4_K_M"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(b), "llama-server was not found") {
		t.Errorf("load without llama-server: %d %s", resp.StatusCode, b)
	}
	if !strings.Contains(errs.String(), "will plan but not load") {
		t.Errorf("serve-api did not say it cannot load:\n%s", errs)
	}
	cancel()
	if code := wait(); code != 0 {
		t.Errorf("serve-api after Ctrl-C: exit %d\n%s", code, errs)
	}
}
