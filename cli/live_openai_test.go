package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// openAIClient is testdata/openai-client/client.mjs, with its pinned
// openai package installed (npm ci there; .ci/run does it). Without node
// or the package the test skips, unless HEADROOM_REQUIRE_ENGINE=1.
func openAIClient(t *testing.T) (node, script string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "openai-client"))
	if err != nil {
		t.Fatal(err)
	}
	missing := func(why string) {
		t.Helper()
		if os.Getenv("HEADROOM_REQUIRE_ENGINE") == "1" {
			t.Fatalf("HEADROOM_REQUIRE_ENGINE=1 but %s", why)
		}
		t.Skip(why)
	}
	node, err = exec.LookPath("node")
	if err != nil {
		missing("no node on PATH: the openai client test needs node 20 and npm")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err != nil {
		missing("the openai package is not installed: run npm ci in " + dir)
	}
	return node, filepath.Join(dir, "client.mjs")
}

// clientStep is one line client.mjs prints.
type clientStep struct {
	Step   string `json:"step"`
	Model  string `json:"model"`
	Status int    `json:"status"`
	Error  string `json:"error"`
	Named  string `json:"named"`
	Chunks int    `json:"chunks"`
	Whole  bool   `json:"whole"`
	Text   string `json:"text"`
	Finish string `json:"finish"`
	MS     int    `json:"ms"`
	// embed and rerank steps
	Vectors int `json:"vectors"`
	Dims    int `json:"dims"`
	Results int `json:"results"`
	// burst steps
	Requests   int      `json:"requests"`
	WholeCount int      `json:"whole_count"`
	Failures   []string `json:"failures"`
}

// runClient runs client.mjs's steps against base and returns the line
// each printed.
func runClient(t *testing.T, base string, steps ...string) []clientStep {
	t.Helper()
	node, script := openAIClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{script, base}, steps...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client.mjs: %v\n%s\n%s", err, out, stderr.String())
	}
	t.Logf("client.mjs:\n%s", out)
	var got []clientStep
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var s clientStep
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got = append(got, s)
	}
	if len(got) != len(steps) {
		t.Fatalf("%d steps, want %d", len(got), len(steps))
	}
	return got
}

// TestLiveProviderOpenAIClient points OpenAI's own JavaScript client at
// the provider over the real llama-server: streamed chats on a, then b,
// then c, which does not fit beside both and stops a (the least recently
// used) by the ledger's arithmetic; a chat with huge, which does not fit
// the machine even alone, answered 503 through the client with the
// reason and nothing stopped; and a completion on b.
func TestLiveProviderOpenAIClient(t *testing.T) {
	bin := liveEngine(t)
	openAIClient(t) // skips, or fails, before the provider starts
	f := startProvider(t, bin, nil)
	steps := runClient(t, f.srv.URL+"/v1", "stream:a", "stream:b", "stream:c", "chat:huge", "complete:b")
	for _, s := range steps[:3] {
		if s.Status != 200 || !s.Whole || s.Chunks == 0 || s.Named != s.Model {
			t.Errorf("stream on %s: status %d, whole %v, %d chunks, named %q, %s", s.Model, s.Status, s.Whole, s.Chunks, s.Named, s.Error)
		}
	}
	if s := steps[3]; s.Status != 503 || !strings.Contains(s.Error, "does not fit") {
		t.Errorf("chat with huge: status %d %q, want 503 saying it does not fit", s.Status, s.Error)
	}
	if s := steps[4]; s.Status != 200 || s.Named != "b" || s.Text == "" || (s.Finish != "length" && s.Finish != "stop") {
		t.Errorf("completion on b: %+v", s)
	}
	if s := f.states(); s["a"] != "unloaded" || s["b"] != "loaded" || s["c"] != "loaded" || s["huge"] != "unloaded" {
		t.Errorf("after the client: %v, want a evicted for c, b and c loaded", s)
	}
	log := f.log.String()
	if !strings.Contains(log, "eviction a: stopped to make room for c (ram short by") {
		t.Errorf("no eviction line for a:\n%s", log)
	}
	if strings.Count(log, "eviction ") != 1 {
		t.Errorf("want exactly one eviction:\n%s", log)
	}
}
