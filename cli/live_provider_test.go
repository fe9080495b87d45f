package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/launch"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/server"
	"github.com/headroom-llm/headroom/source"
	"github.com/headroom-llm/headroom/store"
	"github.com/headroom-llm/headroom/synth"
)

// providerFixture is serve-api's provider over a directory of three
// copies of one sparse model (a, b, c) and one model too big for the
// machine (huge), on a machine whose memory holds two of the copies: the
// third forces an eviction by the ledger's arithmetic.
type providerFixture struct {
	srv    *httptest.Server
	pool   *server.Pool
	ledger *admission.Ledger
	paths  map[string]string // by name
	log    *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) line(l string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(l + "\n")
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// providerOpts is the profile every live provider load runs: one slot of
// 2048 cells, so that the machine's size, not the search, decides.
func providerOpts() plan.SearchOptions {
	o := plan.DefaultSearch()
	o.Parallel, o.Fixed.Ctx = 1, 2048
	// A fixed prompt cache: sized by the plan it would shrink as the
	// machine fills, and the machine sized for two loads would then
	// take a third.
	cram := 64
	o.Fixed.CacheRAM = &cram
	return o
}

// liveProviderDir writes the fixture's models: a, b, c, a tinyllama each,
// and huge, a Llama 3.1 8B, sparse.
func liveProviderDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	src := writeShape(t, t.TempDir(), "tinyllama-1.1b", synth.Q4_K_M)
	for _, n := range []string{"a", "b", "c"} {
		if err := os.Link(src, filepath.Join(dir, n+".gguf")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(writeShape(t, t.TempDir(), "llama-3.1-8b", synth.Q4_K_M), filepath.Join(dir, "huge.gguf")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func startProvider(t testing.TB, bin string, pins []string) *providerFixture {
	t.Helper()
	opts := providerOpts()
	fitParams, _ := engine.FindFitParams(bin, nil)
	return startProviderOn(t, bin, fitParams, twoLoadMachine(t, "tinyllama-1.1b", synth.Q4_K_M, opts), opts, liveProviderDir(t), pins)
}

// startProviderOn serves the provider over dir's models on snap, loading
// with bin under opts.
func startProviderOn(t testing.TB, bin, fitParams string, snap *hw.Snapshot, opts plan.SearchOptions, dir string, pins []string) *providerFixture {
	t.Helper()
	return startProviderWith(t, bin, fitParams, func(*admission.Ledger) *hw.Snapshot { return snap }, opts, dir, pins)
}

// startProviderWith is startProviderOn with a machine that may change
// with what the provider's ledger holds.
func startProviderWith(t testing.TB, bin, fitParams string, machine func(*admission.Ledger) *hw.Snapshot, opts plan.SearchOptions, dir string, pins []string) *providerFixture {
	return startProviderSet(t, bin, fitParams, machine, opts, dir, pins, "", server.PoolConfig{})
}

// startProviderSet is startProviderWith with a presets file (when
// presets is not "") and the pool's queue and drain from pc.
func startProviderSet(t testing.TB, bin, fitParams string, machine func(*admission.Ledger) *hw.Snapshot, opts plan.SearchOptions, dir string, pins []string, presets string, pc server.PoolConfig) *providerFixture {
	t.Helper()
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ledger := sharedLedger(st)
	cat, _ := catalog.Load()
	d := &launch.Deps{Client: source.NewClient(func(string) string { return "" }), Catalog: cat,
		Machine: func(context.Context) (*hw.Snapshot, error) { return machine(ledger), nil }, Cache: &admission.Cache{}, FitParams: fitParams}
	ctx, cancel := context.WithCancel(context.Background())
	rt := &apiRuntime{base: ctx, d: d, st: st, bin: bin, opts: opts, ready: 3 * time.Minute, ledger: ledger}
	if rt.dir, err = modelsDir(dir); err != nil {
		t.Fatal(err)
	}
	served, err := servedModels(rt.dir, pins, 0, rt.checkRef)
	if err != nil {
		t.Fatal(err)
	}
	if presets != "" {
		// serve-api's flags as opts gives them, with each model's own
		// after them.
		rt.settings = &modelSettings{env: Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }},
			args: []string{"-np", "1", "-c", "2048", "-cram", "64"}, presets: presets, pins: pins}
		if served, err = rt.settings.models(rt); err != nil {
			t.Fatal(err)
		}
	}
	f := &providerFixture{ledger: rt.ledger, paths: rt.dir, log: &syncBuffer{}}
	f.pool = server.NewPool(server.PoolConfig{Loader: launchLoader{rt}, Models: served, Accept: rt.checkRef, Log: f.log.line, Queue: pc.Queue, Drain: pc.Drain})
	rt.pool = f.pool
	h, err := server.New(server.Config{Machine: d.Machine, Catalog: cat, Open: rt.open, Runtime: rt, Pool: f.pool})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(h)
	t.Cleanup(func() {
		f.srv.Close()
		rt.stopAll(context.Background())
		cancel()
		if t.Failed() {
			t.Logf("provider log:\n%s", f.log.String())
		}
	})
	return f
}

// liveChat posts a chat to the provider and returns the response.
func liveChat(ctx context.Context, base, model string, stream bool, maxTokens int) (*http.Response, error) {
	body := fmt.Sprintf(`{"model":%q,"stream":%v,"max_tokens":%d,"messages":[{"role":"user","content":"Say hello."}]}`, model, stream, maxTokens)
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return http.DefaultClient.Do(req)
}

// sseChunks reads a whole stream: its chat chunks, and whether it ended
// with [DONE].
func sseChunks(r io.Reader) (chunks []map[string]any, done bool, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			return chunks, true, nil
		}
		var c map[string]any
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return chunks, false, fmt.Errorf("event %q: %w", data, err)
		}
		if e, ok := c["error"]; ok {
			return chunks, false, fmt.Errorf("error event: %v", e)
		}
		chunks = append(chunks, c)
	}
	return chunks, false, sc.Err()
}

// streamChat runs one streamed chat to its end and checks it is whole.
func (f *providerFixture) streamChat(t testing.TB, model string) {
	t.Helper()
	resp, err := liveChat(context.Background(), f.srv.URL, model, true, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("chat with %s: %d %s", model, resp.StatusCode, b)
	}
	chunks, done, err := sseChunks(resp.Body)
	if err != nil || !done || len(chunks) == 0 {
		t.Fatalf("stream from %s: %d chunks, done %v, %v", model, len(chunks), done, err)
	}
	if got := chunks[0]["model"]; got != model {
		t.Errorf("the stream names model %v, want %s", got, model)
	}
}

func (f *providerFixture) states() map[string]string {
	out := map[string]string{}
	for _, m := range f.pool.Models() {
		out[m.Name] = m.State
	}
	return out
}

func (f *providerFixture) held(t testing.TB) []string {
	t.Helper()
	bs, err := f.ledger.Held()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range bs {
		out = append(out, filepath.Base(b.Model))
	}
	return out
}

func TestLiveProviderEvictsByMemory(t *testing.T) {
	bin := liveEngine(t)
	f := startProvider(t, bin, nil)
	f.streamChat(t, "a")
	f.streamChat(t, "b")
	if s := f.states(); s["a"] != "loaded" || s["b"] != "loaded" {
		t.Fatalf("after a and b: %v", s)
	}
	// c does not fit beside a and b; a is the least recently used.
	f.streamChat(t, "c")
	if s := f.states(); s["a"] != "unloaded" || s["b"] != "loaded" || s["c"] != "loaded" {
		t.Errorf("after c: %v, want a evicted and b kept", s)
	}
	if pids := enginesServing(t, f.paths["a"]); len(pids) != 0 {
		t.Errorf("a's llama-server still runs: %v", pids)
	}
	if h := f.held(t); len(h) != 2 {
		t.Errorf("ledger holds %v, want b and c", h)
	}
	if !strings.Contains(f.log.String(), "eviction a: stopped to make room for c (ram short by") {
		t.Errorf("no eviction line for a:\n%s", f.log.String())
	}
	// huge does not fit this machine even alone: 503 at once, nothing
	// stopped.
	resp, err := liveChat(context.Background(), f.srv.URL, "huge", false, 8)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(b), "does not fit") {
		t.Errorf("huge: %d %s, want 503 saying it does not fit", resp.StatusCode, b)
	}
	if s := f.states(); s["b"] != "loaded" || s["c"] != "loaded" {
		t.Errorf("after huge was refused: %v, want b and c loaded", s)
	}
	if pids := enginesServing(t, f.paths["huge"]); len(pids) != 0 {
		t.Errorf("huge reached llama-server: %v", pids)
	}
	t.Logf("provider log:\n%s", f.log.String())
}

func TestLiveProviderPinnedKept(t *testing.T) {
	bin := liveEngine(t)
	f := startProvider(t, bin, []string{"a"})
	for _, m := range []string{"a", "b", "c"} {
		f.streamChat(t, m)
	}
	if s := f.states(); s["a"] != "loaded" || s["b"] != "unloaded" || s["c"] != "loaded" {
		t.Errorf("%v: want the pinned a kept and b evicted", s)
	}
}

func TestLiveProviderChildKilledMidStream(t *testing.T) {
	bin := liveEngine(t)
	f := startProvider(t, bin, nil)
	resp, err := liveChat(context.Background(), f.srv.URL, "a", true, 2000)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	// Past the load's progress comments, to the first token.
	line, err := br.ReadString('\n')
	for err == nil && (line == "\n" || strings.HasPrefix(line, ":")) {
		line, err = br.ReadString('\n')
	}
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first event %q, %v", line, err)
	}
	pids := enginesServing(t, f.paths["a"])
	if len(pids) != 1 {
		t.Fatalf("%d llama-servers serve a, want 1", len(pids))
	}
	var pid int
	fmt.Sscan(pids[0], &pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, done, err := sseChunks(br)
	if err == nil || done {
		t.Errorf("the client read a whole stream from a killed server (done %v, %v)", done, err)
	}
	t.Logf("the client saw: %v", err)
	deadline := time.Now().Add(30 * time.Second)
	for f.states()["a"] != "unloaded" || len(f.held(t)) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after the kill: %v, ledger %v", f.states(), f.held(t))
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.streamChat(t, "a")
	if !strings.Contains(f.log.String(), "exit a:") {
		t.Errorf("no exit line:\n%s", f.log.String())
	}
}

// TestLiveProviderSIGTERM runs serve-api as a real process, loads two
// models through it, sends SIGTERM, and checks that no llama-server is
// left and the shared ledger is empty.
func TestLiveProviderSIGTERM(t *testing.T) {
	bin := liveEngine(t)
	dir := liveProviderDir(t)
	snap := twoLoadMachine(t, "tinyllama-1.1b", synth.Q4_K_M, providerOpts())
	var buf bytes.Buffer
	if err := snap.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	machine := filepath.Join(tmp, "machine.json")
	if err := os.WriteFile(machine, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	storeDir := filepath.Join(tmp, "store")
	cmd := exec.Command(os.Args[0], "-test.run=^$", "--", "serve-api", "--addr", "127.0.0.1:0", "--machine", machine,
		"--models-dir", dir, "--llama-server", bin, "--store", storeDir, "-np", "1", "-c", "2048")
	cmd.Env = append(os.Environ(), "HEADROOM_CLI_CHILD=1", "XDG_CACHE_HOME="+filepath.Join(tmp, "cache"), "HF_HUB_OFFLINE=1")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	addr := regexp.MustCompile(`on http://(127\.0\.0\.1:\d+)/`)
	var base string
	for deadline := time.Now().Add(time.Minute); base == ""; time.Sleep(50 * time.Millisecond) {
		if m := addr.FindStringSubmatch(out.String()); m != nil {
			base = "http://" + m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve-api did not start:\n%s", out.String())
		}
	}
	f := &providerFixture{srv: &httptest.Server{URL: base}}
	f.streamChat(t, "a")
	f.streamChat(t, "b")
	if n := len(enginesServing(t, filepath.Join(dir, "a.gguf"))) + len(enginesServing(t, filepath.Join(dir, "b.gguf"))); n != 2 {
		t.Errorf("%d llama-servers serve a and b, want 2", n)
	}
	// A client that opens a long stream and never reads it: SIGTERM
	// still ends serve-api within 5 s.
	stalled, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	body := `{"model":"a","stream":true,"max_tokens":100000,"messages":[{"role":"user","content":"count to a million"}]}`
	fmt.Fprintf(stalled, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		strings.TrimPrefix(base, "http://"), len(body), body)
	time.Sleep(time.Second)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve-api exited with %v after SIGTERM:\n%s", err, out.String())
		}
		if d := time.Since(signalled); d > 5*time.Second {
			t.Errorf("serve-api took %v to stop after SIGTERM with a stalled client, want 5 s at most", d)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("serve-api did not stop within 60 s of SIGTERM:\n%s", out.String())
	}
	for _, n := range []string{"a", "b"} {
		if pids := enginesServing(t, filepath.Join(dir, n+".gguf")); len(pids) != 0 {
			t.Errorf("%s's llama-server left behind: %v", n, pids)
		}
	}
	l := admission.Ledger{Path: filepath.Join(storeDir, "ledger.json")}
	if held, err := l.Held(); err != nil || len(held) != 0 {
		t.Errorf("ledger after SIGTERM: %+v, %v", held, err)
	}
}
