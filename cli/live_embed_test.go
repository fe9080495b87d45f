package cli

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/synth"
)

// vmHWM is a process's peak resident memory, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM for %d", pid)
	return 0
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
	openAIClient(t) // skips, or fails, before the models are written
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
	steps := runClient(t, f.srv.URL+"/v1", "embed:embed", "rerank:rerank", "stream:chat", "embed:chat")
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
	// A full micro-batch of input grows the encoder's output buffer to
	// 512 rows of logits and embeddings: its peak stays within what the
	// ledger booked for it.
	ids := make([]string, 500)
	for i := range ids {
		ids[i] = strconv.Itoa(1000 + i)
	}
	resp, err := http.Post(f.srv.URL+"/v1/embeddings", "application/json",
		strings.NewReader(`{"model":"embed","input":[`+strings.Join(ids, ",")+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("an embedding of 500 tokens: %d", resp.StatusCode)
	}
	bookings, err := f.ledger.Held()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bookings {
		if filepath.Base(b.Model) != "embed.gguf" {
			continue
		}
		peak := vmHWM(t, b.ChildPID)
		var booked int64
		for _, n := range b.Need {
			booked += n
		}
		t.Logf("embed: peak resident %.1f MiB after 500 tokens, %.1f MiB booked", float64(peak)/(1<<20), float64(booked)/(1<<20))
		if peak > booked {
			t.Errorf("embed's peak resident memory %d B is over the %d B booked for it", peak, booked)
		}
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
