package synth

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

// The parameter counts are the ones Hugging Face reports for each model's
// safetensors, adjusted where a GGUF differs: a GGUF of Llama 3.1 also holds
// the 64-element rope_freqs; Qwen3-0.6B's safetensors hold a copy of the
// tied embedding (751,632,384) that a GGUF does not. Where no exact text-model
// count is published (multimodal models, whose totals include the vision
// tower), the count is the config's arithmetic, done by hand.
func TestShapesMatchPublishedParameterCounts(t *testing.T) {
	tests := []struct {
		name   string
		params uint64
	}{
		{"llama-3.1-8b", 8030261248 + 64},
		{"llama-3.1-70b", 70553706496 + 64},
		{"llama-3.2-1b", 1235814400 + 32},
		{"qwen2.5-0.5b", 494032768},
		{"qwen2.5-7b", 7615616512},
		{"qwen3-0.6b", 751632384 - 151936*1024},
		{"qwen3-8b", 8190735360},
		{"tinyllama-1.1b", 1100048384},
		{"phi-3-mini-4k", 3821079552},
		{"qwen3-30b-a3b", 30532122624},
		{"gpt-oss-20b", 20914757184},
		{"deepseek-v2-lite", 15706484224},
		{"gemma-3-1b", 999885952},
		{"lfm2-1.2b", 1170340608},
		{"lfm2-350m", 354483968},
		// Computed: text model only (the published totals include vision).
		{"gemma-3-4b", 3880263168},
		{"ministral-3-3b", 3429006336},
		// Computed: 24 x 3,765,320 per layer + the 50288 x 768 embedding.
		{"mamba2-130m", 128989632},
		{"gemma-2-2b", 2614341888},
		{"olmo-2-1b", 1484916736},
		{"qwen1.5-moe-a2.7b", 14315784192},
		// Computed from the config (no exact published count at hand).
		{"command-r7b", 8028033024},
		{"granite-4.0-h-micro", 3191396096},
		// 40 x 60,821,504 per layer + the tied 49159 x 2048 embedding
		// (published: 2.53B).
		{"granite-3.3-2b", 2533539840},
		{"nemotron-h-4b", 4489223040},
		// 24 x 50,358,272 per layer, the final norm, and the untied
		// 50304 x 2048 embedding and output (published: 1,414,647,808).
		{"pythia-1.4b", 1414647808},
		{"falcon-h1-0.5b", 521466400},
		// Text model with the NextN block (the published 110B includes it).
		{"glm-4.5-air", 109227310848},
		{"llama-4-scout", 107769861120},
		// Computed from the config, without the MTP block (published: 80B).
		{"qwen3-next-80b-a3b", 79674391296},
		// Computed from the configs, text model only (the published 0.8B
		// and 27B include the vision encoder), without the MTP block:
		// 18 DeltaNet and 6 attention layers with a tied embedding, and
		// 48 and 16 with an untied one.
		{"qwen3.5-0.8b", 752393024},
		{"qwen3.5-27b", 26895998464},
		// Computed from the config, text model only (the published 31B
		// includes the vision encoder): 50 sliding and 10 global layers,
		// no attn_v on the global ones, a tied embedding and the 256-entry
		// rope_freqs table.
		{"gemma-4-31b", 30697345596},
		// 30 layers, each a dense MLP of 2112 beside 128 experts of 704
		// (merged gate and up), the router with its two scales; 3.8B read
		// per token (published: 25.2B, 3.8B active).
		{"gemma-4-26b-a4b", 25233142046},
		// 35 layers with a 256-wide per-layer input each (its table, 2.35B,
		// read by row), the last 20 without K or V and with an FFN twice
		// as wide (published: 5.1B with the vision and audio encoders).
		{"gemma-4-e2b", 4628569635},
		// 42 layers, the last 18 without K or V (published: 8B with the
		// encoders).
		{"gemma-4-e4b", 7463013674},
		// 40 layers of 256 experts of 512 plus a shared one, untied
		// (published: 35B).
		{"qwen3.5-35b-a3b", 34660610688},
		// Computed: text model, both embeddings of 262400 rows, 30 x
		// 62,153,296 per layer.
		{"gemma-3n-e2b", 4458122848},
		// Exactly the count a pinned snapshot of the repository is
		// checked against.
		{"smollm3-3b", 3075098624},
		// Computed from the config with the NextN block, which the
		// published 355B leaves out and the 358B of some listings counts.
		{"glm-4.7", 356785898816},
		// Without the MTP layer llama.cpp does not convert (published:
		// 671B, 685B with it).
		{"deepseek-v3.1", 671026419200},
		// Published: 1T total.
		// V3.1's count plus the lightning indexer's 13,959,424 a layer
		// (q_b 1536x8192, k 7168x128, its norm, proj 7168x64), without
		// the MTP block.
		{"deepseek-v3.2", 671877944064},
		{"kimi-k2", 1026408232448},
		// Untied embedding and output (published: 8.89B).
		{"nemotron-nano-9b-v2", 8888227328},
		// Tied embedding (published: 2.6B).
		{"lfm2-2.6b", 2569272320},
		// The Hub's count of the FP8 checkpoint, 228,703,644,928, less its
		// block scales (223,872 a layer), which a GGUF does not carry.
		{"minimax-m2", 228689764864},
		// BERT encoders without the pooler the converter drops (147,840
		// parameters): published 33.4M and 22.7M with it.
		{"bge-small-en-v1.5", 33212160},
		{"all-minilm-l6-v2", 22565376},
		// Published: 137M.
		{"nomic-embed-text-v1.5", 136731648},
		// Exactly the count of keras-hub's Qwen3-Embedding-0.6B preset; the
		// reranker adds its two-row classifier.
		{"qwen3-embedding-0.6b", 595776512},
		{"qwen3-reranker-0.6b", 595778560},
	}
	for _, tc := range tests {
		m := model(t, tc.name, Q4_K_M)
		if got := m.Params(); got != tc.params {
			t.Errorf("%s: %d parameters, want %d", tc.name, got, tc.params)
		}
	}
	for _, n := range Names() {
		if !slices.ContainsFunc(tests, func(tc struct {
			name   string
			params uint64
		}) bool {
			return tc.name == n
		}) {
			t.Errorf("shape %s has no parameter count test", n)
		}
	}
}

// Each row pins a layout quirk llama.cpp's loader depends on: a name, a
// shape (ggml order) and a type it must see.
func TestArchitectureQuirks(t *testing.T) {
	tests := []struct {
		shape  string
		quant  Quant
		tensor string
		typ    gguf.GGMLType
		dims   []uint64
	}{
		{"qwen3-30b-a3b", Q4_K_M, "blk.0.ffn_gate_inp.weight", gguf.TypeF32, []uint64{2048, 128}},
		{"qwen3-30b-a3b", Q4_K_M, "blk.0.ffn_gate_exps.weight", gguf.TypeQ4_K, []uint64{2048, 768, 128}},
		{"qwen3-30b-a3b", Q4_K_M, "blk.0.ffn_down_exps.weight", gguf.TypeQ6_K, []uint64{768, 2048, 128}},
		{"gpt-oss-20b", MXFP4_MOE, "blk.0.ffn_up_exps.weight", gguf.TypeMXFP4, []uint64{2880, 2880, 32}},
		{"gpt-oss-20b", MXFP4_MOE, "blk.0.attn_q.weight", gguf.TypeQ8_0, []uint64{2880, 4096}},
		{"gpt-oss-20b", MXFP4_MOE, "blk.0.attn_sinks.weight", gguf.TypeF32, []uint64{64}},
		{"gpt-oss-20b", MXFP4_MOE, "blk.23.ffn_down_exps.bias", gguf.TypeF32, []uint64{2880, 32}},
		{"deepseek-v2-lite", Q4_K_M, "blk.0.ffn_gate.weight", gguf.TypeQ4_K, []uint64{2048, 10944}},
		{"deepseek-v2-lite", Q4_K_M, "blk.1.ffn_up_shexp.weight", gguf.TypeQ4_K, []uint64{2048, 2816}},
		{"deepseek-v2-lite", Q4_K_M, "blk.1.attn_kv_a_mqa.weight", gguf.TypeQ4_K, []uint64{2048, 576}},
		{"deepseek-v2-lite", Q4_K_M, "blk.1.attn_k_b.weight", gguf.TypeQ5_0, []uint64{128, 512, 16}},
		{"deepseek-v2-lite", Q4_K_M, "blk.1.attn_q.weight", gguf.TypeQ4_K, []uint64{2048, 3072}},
		{"phi-3-mini-4k", Q4_K_M, "blk.0.attn_qkv.weight", gguf.TypeQ6_K, []uint64{3072, 9216}},
		{"phi-3-mini-4k", Q4_K_M, "blk.0.ffn_up.weight", gguf.TypeQ4_K, []uint64{3072, 16384}},
		{"gemma-3-1b", Q8_0, "blk.0.post_ffw_norm.weight", gguf.TypeF32, []uint64{1152}},
		{"gemma-3-1b", Q8_0, "blk.0.attn_q.weight", gguf.TypeQ8_0, []uint64{1152, 1024}},
		{"lfm2-350m", Q8_0, "token_embd_norm.weight", gguf.TypeF32, []uint64{1024}},
		{"lfm2-350m", Q8_0, "blk.0.shortconv.conv.weight", gguf.TypeF32, []uint64{3, 1024}},
		{"lfm2-350m", Q8_0, "blk.2.attn_k.weight", gguf.TypeQ8_0, []uint64{1024, 512}},
		{"mamba2-130m", Q8_0, "blk.0.ssm_in.weight", gguf.TypeQ8_0, []uint64{768, 3352}},
		{"mamba2-130m", Q8_0, "blk.0.ssm_a", gguf.TypeF32, []uint64{1, 24}},
		{"mamba2-130m", Q8_0, "blk.0.ssm_norm.weight", gguf.TypeF32, []uint64{1536, 1}},
		{"ministral-3-3b", Q4_K_M, "blk.0.attn_q.weight", gguf.TypeQ4_K, []uint64{3072, 4096}},
		{"olmo-2-1b", Q8_0, "blk.0.attn_k_norm.weight", gguf.TypeF32, []uint64{2048}},
		{"olmo-2-1b", Q8_0, "blk.0.post_ffw_norm.weight", gguf.TypeF32, []uint64{2048}},
		{"qwen1.5-moe-a2.7b", Q4_K_M, "blk.0.ffn_gate_inp_shexp.weight", gguf.TypeF32, []uint64{2048}},
		{"qwen1.5-moe-a2.7b", Q4_K_M, "blk.0.ffn_up_shexp.weight", gguf.TypeQ4_K, []uint64{2048, 5632}},
		{"nemotron-h-4b", Q8_0, "blk.0.ssm_in.weight", gguf.TypeQ8_0, []uint64{3072, 16496}},
		{"nemotron-h-4b", Q8_0, "blk.1.ffn_up.weight", gguf.TypeQ8_0, []uint64{3072, 12288}},
		{"nemotron-h-4b", Q8_0, "blk.7.attn_k.weight", gguf.TypeQ8_0, []uint64{3072, 1024}},
		{"falcon-h1-0.5b", Q8_0, "blk.0.ffn_norm", gguf.TypeF32, []uint64{1024}},
		{"falcon-h1-0.5b", Q8_0, "blk.0.attn_q.weight", gguf.TypeQ8_0, []uint64{1024, 512}},
		{"granite-4.0-h-micro", Q8_0, "blk.9.attn_v.weight", gguf.TypeQ8_0, []uint64{2048, 512}},
		{"glm-4.5-air", Q4_K_M, "blk.46.nextn.eh_proj.weight", gguf.TypeQ4_K, []uint64{8192, 4096}},
		{"glm-4.5-air", Q4_K_M, "blk.1.exp_probs_b.bias", gguf.TypeF32, []uint64{128}},
		{"glm-4.5-air", Q4_K_M, "blk.0.ffn_gate.weight", gguf.TypeQ4_K, []uint64{4096, 10944}},
		{"llama-4-scout", Q4_K_M, "blk.0.ffn_up_shexp.weight", gguf.TypeQ4_K, []uint64{5120, 8192}},
		{"llama-4-scout", Q4_K_M, "blk.0.ffn_gate_exps.weight", gguf.TypeQ4_K, []uint64{5120, 8192, 16}},
		// Qwen3-Next: Q with its output gate on attention layers (every
		// 4th), split DeltaNet projections on the others.
		{"qwen3-next-80b-a3b", Q4_K_M, "blk.3.attn_q.weight", gguf.TypeQ4_K, []uint64{2048, 8192}},
		{"qwen3-next-80b-a3b", Q4_K_M, "blk.3.attn_k_norm.weight", gguf.TypeF32, []uint64{256}},
		{"qwen3-next-80b-a3b", Q4_K_M, "blk.0.attn_qkv.weight", gguf.TypeQ6_K, []uint64{2048, 8192}},
		{"qwen3-next-80b-a3b", Q4_K_M, "blk.0.attn_gate.weight", gguf.TypeQ4_K, []uint64{2048, 4096}},
		{"qwen3-next-80b-a3b", Q4_K_M, "blk.0.ssm_conv1d.weight", gguf.TypeF32, []uint64{4, 8192}},
		{"qwen3-next-80b-a3b", Q4_K_M, "blk.0.ssm_ba.weight", gguf.TypeQ4_K, []uint64{2048, 64}},
		{"qwen3-next-80b-a3b", Q4_K_M, "blk.0.ssm_a", gguf.TypeF32, []uint64{32}},
		{"qwen3-next-80b-a3b", Q4_K_M, "blk.0.ffn_down_exps.weight", gguf.TypeQ6_K, []uint64{512, 2048, 512}},
		// Gemma 3n: 256 per-layer values for each of 30 layers and every
		// token; the quantizer leaves AltUp, Laurel and the per-layer
		// model projection alone.
		{"gemma-3n-e2b", Q8_0, "per_layer_token_embd.weight", gguf.TypeQ8_0, []uint64{7680, 262400}},
		{"gemma-3n-e2b", Q8_0, "per_layer_model_proj.weight", gguf.TypeF16, []uint64{2048, 7680}},
		{"gemma-3n-e2b", Q8_0, "altup_proj.weight", gguf.TypeF16, []uint64{2048, 2048, 3}},
		{"gemma-3n-e2b", Q8_0, "blk.0.altup_predict_coef.weight", gguf.TypeF16, []uint64{4, 16}},
		{"gemma-3n-e2b", Q8_0, "blk.29.laurel_l.weight", gguf.TypeF16, []uint64{2048, 64}},
		{"gemma-3n-e2b", Q8_0, "blk.29.inp_gate.weight", gguf.TypeQ8_0, []uint64{2048, 256}},
		{"gemma-3n-e2b", Q8_0, "blk.0.altup_correct_scale.weight", gguf.TypeF32, []uint64{2048}},
		{"gemma-3n-e2b", Q8_0, "blk.25.attn_k.weight", gguf.TypeQ8_0, []uint64{2048, 512}},
		// Q5_K_M: Q6_K output, Q6_K V and ffn_down on use_more_bits layers
		// (0 and 31 of 32; not 4), Q5_K elsewhere.
		{"llama-3.1-8b", Q5_K_M, "output.weight", gguf.TypeQ6_K, []uint64{4096, 128256}},
		{"llama-3.1-8b", Q5_K_M, "blk.0.attn_v.weight", gguf.TypeQ6_K, []uint64{4096, 1024}},
		{"llama-3.1-8b", Q5_K_M, "blk.4.attn_v.weight", gguf.TypeQ5_K, []uint64{4096, 1024}},
		{"llama-3.1-8b", Q5_K_M, "blk.4.ffn_down.weight", gguf.TypeQ5_K, []uint64{14336, 4096}},
		{"llama-3.1-8b", Q5_K_M, "blk.31.ffn_down.weight", gguf.TypeQ6_K, []uint64{14336, 4096}},
		{"llama-3.1-8b", Q5_K_M, "blk.4.attn_q.weight", gguf.TypeQ5_K, []uint64{4096, 4096}},
		// Rows of 1408 are not whole 256-blocks: llama.cpp's fallbacks,
		// Q5_K -> Q5_1 and Q6_K -> Q8_0.
		{"deepseek-v2-lite", Q5_K_M, "blk.4.ffn_down_exps.weight", gguf.TypeQ5_1, []uint64{1408, 2048, 64}},
		{"deepseek-v2-lite", Q5_K_M, "blk.1.ffn_down_exps.weight", gguf.TypeQ8_0, []uint64{1408, 2048, 64}},
		{"deepseek-v2-lite", Q6_K, "blk.4.ffn_down_exps.weight", gguf.TypeQ8_0, []uint64{1408, 2048, 64}},
		{"llama-3.1-8b", Q6_K, "blk.4.attn_q.weight", gguf.TypeQ6_K, []uint64{4096, 4096}},
		{"llama-3.1-8b", Q6_K, "output.weight", gguf.TypeQ6_K, []uint64{4096, 128256}},
	}
	for _, tc := range tests {
		m := model(t, tc.shape, tc.quant)
		var found *gguf.TensorInfo
		for _, f := range m.Files {
			for i := range f.Tensors {
				if f.Tensors[i].Name == tc.tensor {
					found = &f.Tensors[i]
				}
			}
		}
		if found == nil {
			t.Errorf("%s: no tensor %s", tc.shape, tc.tensor)
			continue
		}
		if found.Type != tc.typ || !slices.Equal(found.Shape, tc.dims) {
			t.Errorf("%s %s: %s %v, want %s %v", tc.shape, tc.tensor, found.Type, found.Shape, tc.typ, tc.dims)
		}
	}
}

// Tied embeddings leave output.weight out (llama.cpp then loads token_embd a
// second time for the output layer); the others must have it.
func TestTiedOutput(t *testing.T) {
	for _, n := range Names() {
		s, _ := Lookup(n)
		m := model(t, n, Q4_K_M)
		has := false
		for _, ti := range m.Files[0].Tensors {
			has = has || ti.Name == "output.weight"
		}
		if s.encoder() {
			// an encoder has no LM head at all
			if has {
				t.Errorf("%s: an encoder with output.weight", n)
			}
			continue
		}
		if has == s.TiedOutput {
			t.Errorf("%s: TiedOutput %v but output.weight present = %v", n, s.TiedOutput, has)
		}
	}
}

func TestBuildReadsBack(t *testing.T) {
	s, _ := Lookup("tinyllama-1.1b")
	b, err := Build(s, Q8_0)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "t.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	data, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if f.Architecture() != "llama" || len(f.Tensors) != 3+22*9 {
		t.Errorf("arch %q, %d tensors", f.Architecture(), len(f.Tensors))
	}
	v, _ := f.Lookup("tokenizer.ggml.tokens")
	arr, _ := v.AsArray()
	if arr.Len() != 32000 || arr.Index(3).String() != `"<0x00>"` {
		t.Errorf("vocabulary: %d tokens, token 3 = %v", arr.Len(), arr.Index(3))
	}
	if _, err := ParseQuant("q9_9"); err == nil {
		t.Errorf("unknown quant accepted")
	}
}

// Metadata llama.cpp requires per architecture (a missing required key
// fails the load), read back from the built header.
func TestArchitectureMetadata(t *testing.T) {
	tests := []struct {
		shape string
		key   string
		want  string
	}{
		{"gemma-3-1b", "gemma3.attention.sliding_window", "512"},
		{"gpt-oss-20b", "gpt-oss.attention.sliding_window", "128"},
		{"gpt-oss-20b", "gpt-oss.expert_feed_forward_length", "2880"},
		{"qwen3-30b-a3b", "qwen3moe.expert_used_count", "8"},
		{"deepseek-v2-lite", "deepseek2.attention.key_length", "576"},
		{"deepseek-v2-lite", "deepseek2.attention.value_length_mla", "128"},
		{"deepseek-v2-lite", "deepseek2.attention.head_count_kv", "1"},
		{"deepseek-v2-lite", "deepseek2.expert_shared_count", "2"},
		{"lfm2-350m", "lfm2.attention.head_count_kv", "[0 0 8 0 0 8 0 0 8 0 8 0 8 0 8 0]"},
		{"lfm2-350m", "lfm2.shortconv.l_cache", "3"},
		{"mamba2-130m", "mamba2.ssm.time_step_rank", "24"},
		{"ministral-3-3b", "mistral3.attention.key_length", "128"},
		{"phi-3-mini-4k", "phi3.rope.dimension_count", "96"},
		{"command-r7b", "cohere2.attention.layer_norm_epsilon", "1e-05"},
		{"command-r7b", "cohere2.logit_scale", "0.25"},
		{"nemotron-h-4b", "nemotron_h.attention.head_count_kv", "[0 0 0 0 0 0 0 8 0 0 0 0 0 0 0 0 0 0 8 0 0 0 0 0 0 0 0 0 0 8 0 0 0 0 0 0 0 0 0 0 8 0 0 0 0 0 0 0 0 0 0 0]"},
		{"qwen1.5-moe-a2.7b", "qwen2moe.expert_shared_feed_forward_length", "5632"},
		{"glm-4.5-air", "glm4moe.nextn_predict_layers", "1"},
		{"glm-4.5-air", "glm4moe.rope.dimension_count", "64"},
		{"llama-4-scout", "llama4.interleave_moe_layer_step", "1"},
		{"qwen3-next-80b-a3b", "qwen3next.full_attention_interval", "4"},
		{"qwen3-next-80b-a3b", "qwen3next.ssm.group_count", "16"},
		{"qwen3-next-80b-a3b", "qwen3next.rope.dimension_count", "64"},
		{"qwen3-next-80b-a3b", "qwen3next.attention.head_count_kv", "2"},
		{"gemma-3n-e2b", "gemma3n.attention.sliding_window", "512"},
		{"gemma-3n-e2b", "gemma3n.attention.shared_kv_layers", "10"},
		{"gemma-3n-e2b", "gemma3n.embedding_length_per_layer_input", "256"},
		{"gemma-3n-e2b", "gemma3n.feed_forward_length", fmt.Sprint(slices.Repeat([]int64{8192}, 30))},
	}
	for _, tc := range tests {
		m := model(t, tc.shape, Q4_K_M)
		v, ok := m.Files[0].Lookup(tc.key)
		if !ok {
			t.Errorf("%s: no %s", tc.shape, tc.key)
			continue
		}
		got := v.String()
		if arr, ok := v.AsArray(); ok {
			ints, _ := arr.Ints()
			got = fmt.Sprint(ints)
		}
		if got != tc.want {
			t.Errorf("%s: %s = %s, want %s", tc.shape, tc.key, got, tc.want)
		}
	}
}

// built caches headers across tests: a vocabulary of 262k tokens takes a
// noticeable moment to build, and many rows share a shape.
var built = map[string]*gguf.Model{}

func model(t *testing.T, name string, q Quant) *gguf.Model {
	t.Helper()
	if m, ok := built[name+":"+string(q)]; ok {
		return m
	}
	s, ok := Lookup(name)
	if !ok {
		t.Fatalf("no shape %q", name)
	}
	b, err := Build(s, q)
	if err != nil {
		t.Fatal(err)
	}
	f, err := b.Layout()
	if err != nil {
		t.Fatal(err)
	}
	m, err := gguf.NewModel(f)
	if err != nil {
		t.Fatal(err)
	}
	built[name+":"+string(q)] = m
	return m
}
