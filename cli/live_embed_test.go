package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/synth"
)

// embedStep is one line client.mjs prints for embed and rerank steps.
type embedStep struct {
	clientStep
	Vectors int `json:"vectors"`
	Dims    int `json:"dims"`
	Results int `json:"results"`
}

// TestLiveProviderEmbeddings serves a chat model, an embedding model and a
// reranker from one directory through the provider and the real
// llama-server: OpenAI's client embeds two inputs with nomic-embed-text
// (a BERT encoder), a rerank call scores two documents with
// Qwen3-Reranker, a streamed chat runs on TinyLlama, each loaded on its
// first request by the same plan and ledger, and each child runs with the
// flags its plan gives it: --embedding for the encoder, --rerank for the
// reranker, neither for the chat model, whose /v1/embeddings llama-server
// refuses.
func TestLiveProviderEmbeddings(t *testing.T) {
	bin := liveEngine(t)
	node, script := openAIClient(t)
	dir := t.TempDir()
	for name, shape := range map[string]string{"chat": "tinyllama-1.1b", "embed": "nomic-embed-text-v1.5", "rerank": "qwen3-reranker-0.6b"} {
		q := synth.Q8_0
		if name == "chat" {
			q = synth.Q4_K_M
		}
		if err := os.Rename(writeShape(t, t.TempDir(), shape, q), filepath.Join(dir, name+".gguf")); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := hw.LoadMachine("cpu-32")
	if err != nil {
		t.Fatal(err)
	}
	opts := providerOpts()
	fitParams, _ := engine.FindFitParams(bin, nil)
	f := startProviderOn(t, bin, fitParams, snap, opts, dir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, f.srv.URL+"/v1", "embed:embed", "rerank:rerank", "stream:chat", "embed:chat")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client.mjs: %v\n%s\n%s", err, out, stderr.String())
	}
	t.Logf("client.mjs:\n%s", out)
	var steps []embedStep
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var s embedStep
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		steps = append(steps, s)
	}
	if len(steps) != 4 {
		t.Fatalf("%d steps, want 4", len(steps))
	}
	if s := steps[0]; s.Status != 200 || s.Vectors != 2 || s.Dims != 768 {
		t.Errorf("embeddings from embed: %+v, want two vectors of 768", s)
	}
	if s := steps[1]; s.Status != 200 || s.Results != 2 {
		t.Errorf("rerank with rerank: %+v, want two results", s)
	}
	if s := steps[2]; s.Status != 200 || !s.Whole || s.Chunks == 0 {
		t.Errorf("stream on chat: %+v", s)
	}
	if s := steps[3]; s.Status < 400 {
		t.Errorf("embeddings from the chat model: %+v, want llama-server's refusal (it runs without --embedding)", s)
	}
	if s := f.states(); s["chat"] != "loaded" || s["embed"] != "loaded" || s["rerank"] != "loaded" {
		t.Errorf("states %v, want all three loaded", s)
	}
	bookings, err := f.ledger.Held()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"chat.gguf": "", "embed.gguf": "--embedding", "rerank.gguf": "--rerank"}
	for _, b := range bookings {
		flag, ok := want[filepath.Base(b.Model)]
		if !ok {
			continue
		}
		delete(want, filepath.Base(b.Model))
		raw, err := os.ReadFile("/proc/" + strconv.Itoa(b.ChildPID) + "/cmdline")
		if err != nil {
			t.Errorf("%s: the child's command line: %v", b.Model, err)
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		has := func(f string) bool { return slices.Contains(args, f) }
		switch {
		case flag == "" && (has("--embedding") || has("--rerank")):
			t.Errorf("%s runs with %q, want neither --embedding nor --rerank", b.Model, args)
		case flag != "" && !has(flag):
			t.Errorf("%s runs with %q, want %s", b.Model, args, flag)
		}
	}
	if len(want) > 0 {
		t.Errorf("no booking for %v", want)
	}
}
