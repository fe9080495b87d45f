package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/synth"
)

// writeLayers writes a synth shape cut to its first n layers: every
// tensor, key and quantization of the published shape, so the per-layer
// memory rules llama.cpp applies are the real model's, at a size that
// loads in seconds beside the rest of the tests. n keeps each shape's
// layer pattern whole (Gemma 4's five sliding layers to one global,
// Qwen3.5's three DeltaNet layers to one attention layer).
func writeLayers(t *testing.T, dir, shape string, n int, q synth.Quant) string {
	t.Helper()
	return writeVariant(t, dir, shape, n, 0, q)
}

// writeVariant is writeLayers with mtp multi-token-prediction blocks
// after the layers, as current conversions of Qwen3.5 and 3.6 carry one
// (mtp_num_hidden_layers); n 0 keeps every layer.
func writeVariant(t *testing.T, dir, shape string, n, mtp int, q synth.Quant) string {
	t.Helper()
	s, ok := synth.Lookup(shape)
	if !ok {
		t.Fatalf("no synth shape %s", shape)
	}
	if n == 0 {
		n = s.Layers
	}
	if n <= 0 || n > s.Layers {
		t.Fatalf("%s has %d layers, cannot keep %d", shape, s.Layers, n)
	}
	name := fmt.Sprintf("%s-%dl", shape, n)
	if n < s.Layers {
		s.Name = fmt.Sprintf("%s (first %d of %d layers)", s.Name, n, s.Layers)
	}
	if mtp > 0 {
		ssm := *s.SSM
		ssm.MTP = mtp
		s.SSM = &ssm
		s.Name += fmt.Sprintf(" with %d MTP block", mtp)
		name += fmt.Sprintf("-mtp%d", mtp)
	}
	s.Layers = n
	b, err := synth.Build(s, q)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+"."+string(q)+".gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLiveServeCheck2026 is `serve --check` with the real llama-server on
// 2026's natively modeled families, each at several profiles: Qwen3.5/3.6
// dense (qwen35), its 35B-A3B (qwen35moe), Gemma 4 31B (gemma4), SmolLM3
// (smollm3) and GLM-4.7 (glm4moe at full size). The
// full-size shapes do not fit a 24 GB machine by headroom's own account
// (they are held to llama-server's logs in live conformance instead), so
// the two big ones run with their first layers only: the same tensors per
// layer, the same caches and the same graph, fewer times.
func TestLiveServeCheck2026(t *testing.T) {
	bin := liveEngine(t)
	models := t.TempDir()
	type profile struct {
		name  string
		flags []string
	}
	for _, tc := range []struct {
		shape    string
		layers   int // 0: the whole model
		mtp      int // MTP blocks after the layers
		q        synth.Quant
		profiles []profile
	}{
		{"qwen3.5-0.8b", 0, 0, synth.Q8_0, []profile{
			{"two slots at 8192", []string{"-c", "8192", "-np", "2"}},
			{"q8_0 cache", []string{"-c", "4096", "-np", "1", "-ctk", "q8_0", "-ctv", "q8_0"}},
		}},
		// As current conversions ship it: the MTP block loads no
		// weights and keeps no cache, and the graph leaves it out.
		{"qwen3.5-0.8b", 0, 1, synth.Q8_0, []profile{
			{"MTP block, plan defaults", nil},
		}},
		{"qwen3.5-35b-a3b", 8, 1, synth.Q4_K_M, []profile{
			{"one slot at 4096", []string{"-c", "4096", "-np", "1"}},
			{"q8_0 cache, two slots", []string{"-c", "8192", "-np", "2", "-ctk", "q8_0", "-ctv", "q8_0"}},
		}},
		// Three dense layers, one MoE layer (160 experts, per-head q/k
		// norms, weights normalized and scaled by 2.5) and the NextN block.
		// RoPE left out of every fourth layer.
		{"smollm3-3b", 0, 0, synth.Q4_K_M, []profile{
			{"one slot at 8192", []string{"-c", "8192", "-np", "1"}},
			{"q8_0 cache, two slots", []string{"-c", "16384", "-np", "2", "-ctk", "q8_0", "-ctv", "q8_0"}},
		}},
		{"glm-4.7", 5, 0, synth.Q4_K_M, []profile{
			{"one slot at 4096", []string{"-c", "4096", "-np", "1"}},
		}},
		{"gemma-4-31b", 12, 0, synth.Q5_K_M, []profile{
			{"one slot at 4096", []string{"-c", "4096", "-np", "1"}},
			{"four slots at 32768", []string{"-c", "32768", "-np", "4"}},
			{"q8_0 cache, two slots", []string{"-c", "16384", "-np", "2", "-ctk", "q8_0", "-ctv", "q8_0"}},
		}},
	} {
		path := writeVariant(t, models, tc.shape, tc.layers, tc.mtp, tc.q)
		for _, p := range tc.profiles {
			t.Run(filepath.Base(path)+"/"+p.name, func(t *testing.T) {
				var out, errOut bytes.Buffer
				env := liveEnv(t, &out, &errOut)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				defer cancel()
				args := append([]string{"serve", path, "--check", "--llama-server", bin}, p.flags...)
				start := time.Now()
				code := Main(ctx, args, env)
				t.Logf("%v: exit %d in %s\n%s", args[1:], code, time.Since(start).Round(time.Millisecond), out.String())
				if code != 0 || !strings.Contains(out.String(), "check passed") {
					t.Fatalf("serve --check failed (exit %d):\n%s\n%s", code, out.String(), errOut.String())
				}
				for _, want := range []string{"CPU_", "compute", "equal"} {
					if !strings.Contains(out.String(), want) {
						t.Errorf("the comparison lacks %q", want)
					}
				}
			})
		}
	}
}

// TestLiveServeCheckBigMoE is serve --check on DeepSeek V3.1's and Kimi
// K2's first layers: MLA with a low-rank query, 256 or 384 routed
// experts with a selection bias, V3's expert groups (8, of which 4 are
// kept), the weights normalized and scaled. Each takes 12-19 GiB of
// memory and a few minutes, more than CI's shared run can spare, so it
// runs where HEADROOM_LIVE_BIG_MOE=1 (measured on 2026-12-02 with the
// CPU build of 80fb11a: every buffer equal, compute 217.01 and 412.01 MiB).
func TestLiveServeCheckBigMoE(t *testing.T) {
	if os.Getenv("HEADROOM_LIVE_BIG_MOE") != "1" {
		t.Skip("needs 12-19 GiB of memory and minutes per model: set HEADROOM_LIVE_BIG_MOE=1")
	}
	bin := liveEngine(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		shape  string
		layers int
	}{
		{"kimi-k2", 2},       // one dense layer, one MoE layer
		{"deepseek-v3.1", 4}, // three dense layers, one MoE layer
	} {
		t.Run(tc.shape, func(t *testing.T) {
			path := writeLayers(t, dir, tc.shape, tc.layers, synth.Q4_K_M)
			var out, errOut bytes.Buffer
			env := liveEnv(t, &out, &errOut)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			code := Main(ctx, []string{"serve", path, "--check", "--llama-server", bin, "-c", "4096", "-np", "1"}, env)
			t.Logf("exit %d\n%s", code, out.String())
			if code != 0 || !strings.Contains(out.String(), "check passed") {
				t.Fatalf("serve --check failed (exit %d):\n%s\n%s", code, out.String(), errOut.String())
			}
		})
	}
}

// TestLiveServeCheckServing is serve --check --check-serving with the
// real llama-server: the plan's own -cram, then distinct prompts until the
// prompt cache and checkpoints stop growing, llama-server's peak resident
// memory held to the plan's figure for RAM. A dense model and a hybrid
// one (LFM2: checkpoints of its convolution state).
func TestLiveServeCheckServing(t *testing.T) {
	bin := liveEngine(t)
	models := t.TempDir()
	for _, tc := range []struct {
		shape  string
		layers int // 0: all
		flags  []string
	}{
		{"qwen3-0.6b", 0, []string{"-c", "4096", "-np", "1"}},
		{"lfm2-350m", 0, []string{"-c", "4096", "-np", "1", "-cram", "64"}},
		// embedding servers: inputs to /v1/embeddings grow the output
		// buffer, and idle slots go to the prompt cache whatever the task
		{"bge-small-en-v1.5", 0, []string{"-c", "1024", "-np", "2"}},
		{"qwen3-reranker-0.6b", 0, []string{"-c", "2048", "-np", "2", "-cram", "128"}},
		// drafting with the MTP head: the draft's state in every prompt
		// cache entry and checkpoint, the output buffers grown to the
		// drafted rows and the head's hidden states
		{"qwen3.5-0.8b-mtp", 0, []string{"-c", "2048", "-np", "2", "-cram", "64", "--spec-type", "draft-mtp"}},
		// Gemma 4 26B-A4B's layers (five sliding, one global, experts on
		// each), six of its thirty: sliding-window checkpoints
		{"gemma-4-26b-a4b", 6, []string{"-c", "4096", "-np", "1", "-cram", "64"}},
		// Gemma 4 E2B whole: per-layer inputs, and 20 layers reading
		// earlier caches, which add nothing to a checkpoint
		{"gemma-4-e2b", 0, []string{"-c", "4096", "-np", "1", "-cram", "64"}},
	} {
		path := writeLayers(t, models, tc.shape, tc.layers, synth.Q8_0)
		t.Run(tc.shape, func(t *testing.T) {
			var out, errOut bytes.Buffer
			env := liveEnv(t, &out, &errOut)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			args := append([]string{"serve", path, "--check", "--check-serving", "--check-prompt-tokens", "300", "--llama-server", bin}, tc.flags...)
			code := Main(ctx, args, env)
			t.Logf("%v: exit %d\n%s", args[1:], code, out.String())
			if code != 0 || !strings.Contains(out.String(), "check passed") || !strings.Contains(out.String(), "): within") {
				t.Fatalf("serve --check --check-serving failed (exit %d):\n%s\n%s", code, out.String(), errOut.String())
			}
			if !strings.Contains(out.String(), "prompt_cache") {
				t.Errorf("no prompt cache counted:\n%s", out.String())
			}
			if strings.HasSuffix(tc.shape, "-mtp") && (!strings.Contains(out.String(), "draft compute") || !strings.Contains(out.String(), "output_growth")) {
				t.Errorf("a drafting server's check shows no draft context or output growth:\n%s", out.String())
			}
			if strings.Contains(tc.shape, "bge") || strings.Contains(tc.shape, "reranker") {
				if !strings.Contains(out.String(), "output_growth") || !strings.Contains(out.String(), "ready after a real embedding") && !strings.Contains(out.String(), "ready after a real rerank") {
					t.Errorf("an embedding server's check says nothing of its output growth or its proof:\n%s", out.String())
				}
			}
		})
	}
}
