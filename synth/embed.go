package synth

import (
	"fmt"
	"strconv"

	"github.com/headroom-llm/headroom/gguf"
)

// Embedding and reranking models: the BERT encoders (bert.cpp and
// nomic-bert.cpp of llama.cpp) and decoders whose converter wrote a
// pooling type (Qwen3-Embedding, Qwen3-Reranker).

// Pooling values as llama.cpp's enum llama_pooling_type numbers them, the
// values of {arch}.pooling_type.
var poolingTypes = map[string]uint32{"none": 0, "mean": 1, "cls": 2, "last": 3, "rank": 4}

// encoder reports whether the architecture is a BERT-style encoder:
// non-causal attention and no KV cache.
func (s Shape) encoder() bool { return s.Arch == "bert" || s.Arch == "nomic-bert" }

// embedMetadata writes the keys of an embedding or reranking model: the
// encoder's non-causal attention, the pooling type and the classifier's
// labels.
func embedMetadata(k keys, s Shape) {
	if s.encoder() {
		k.set("attention.causal", gguf.BoolValue(false))
	}
	if s.Pooling != "" {
		k.u32("pooling_type", int(poolingTypes[s.Pooling]))
	}
	if len(s.ClsLabels) > 0 {
		k.set("classifier.output_labels", gguf.StringsValue(s.ClsLabels))
	}
	if s.RerankPrompt != "" {
		k.b.Set("tokenizer.chat_template.rerank", gguf.StringValue(s.RerankPrompt))
	}
}

// qwen3RerankPrompt is the prompt of Qwen3-Reranker's model card, which
// llama.cpp's converter writes as the "rerank" template.
const qwen3RerankPrompt = "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct provided. " +
	"Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n" +
	"<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n<Query>: {query}\n<Document>: {document}<|im_end|>\n" +
	"<|im_start|>assistant\n<think>\n\n</think>\n\n"

// bertBlocks is bert.cpp's layout: token, token-type and position
// embeddings with a normed sum, separate q, k and v with biases, a
// post-attention norm, a GELU FFN with biases and a post-FFN norm; the
// reranking head (pooler and classifier) where the model has one. The
// converter keeps position and token-type embeddings in F32.
func bertBlocks(t *tensors, s Shape) {
	t.add("token_embd.weight", s.Embd, s.Vocab)
	t.f32("token_types.weight", s.Embd, tokenTypes)
	t.f32("position_embd.weight", s.Embd, s.CtxTrain)
	encoderBlocks(t, s, false)
	clsHead(t, s)
}

// nomicBertBlocks is nomic-bert's layout: no position embedding (RoPE),
// one fused attn_qkv without bias, and a SwiGLU FFN without biases.
func nomicBertBlocks(t *tensors, s Shape) {
	t.add("token_embd.weight", s.Embd, s.Vocab)
	t.f32("token_types.weight", s.Embd, tokenTypes)
	encoderBlocks(t, s, true)
}

// encoderBlocks writes the embedding norm and the layers of bert and
// nomic-bert.
func encoderBlocks(t *tensors, s Shape, nomic bool) {
	t.f32("token_embd_norm.weight", s.Embd)
	t.f32("token_embd_norm.bias", s.Embd)
	for i := range s.Layers {
		p := blk(i)
		if nomic {
			t.add(p+"attn_qkv.weight", s.Embd, 3*s.Embd)
		} else {
			for _, n := range []string{"q", "k", "v"} {
				t.add(p+"attn_"+n+".weight", s.Embd, s.Embd)
				t.f32(p+"attn_"+n+".bias", s.Embd)
			}
		}
		t.add(p+"attn_output.weight", s.Embd, s.Embd)
		if !nomic {
			t.f32(p+"attn_output.bias", s.Embd)
		}
		t.f32(p+"attn_output_norm.weight", s.Embd)
		t.f32(p+"attn_output_norm.bias", s.Embd)
		t.add(p+"ffn_up.weight", s.Embd, s.FF)
		if nomic {
			t.add(p+"ffn_gate.weight", s.Embd, s.FF)
		} else {
			t.f32(p+"ffn_up.bias", s.FF)
		}
		t.add(p+"ffn_down.weight", s.FF, s.Embd)
		if !nomic {
			t.f32(p+"ffn_down.bias", s.Embd)
		}
		t.f32(p+"layer_output_norm.weight", s.Embd)
		t.f32(p+"layer_output_norm.bias", s.Embd)
	}
}

// clsHead writes a reranker's classifier (cls.output), one row per label.
func clsHead(t *tensors, s Shape) {
	if s.Pooling == "rank" {
		t.add("cls.output.weight", s.Embd, len(s.ClsLabels))
	}
}

// tokenTypes is the token-type vocabulary of BERT's encoders (type_vocab_size:
// two sentences).
const tokenTypes = 2

// wordPiece writes a WPM vocabulary as BERT's converter does: [PAD] at 0,
// [UNK], [CLS], [SEP] and [MASK] at 100-103, word pieces elsewhere.
func wordPiece(b *gguf.Builder, s Shape) error {
	if s.Vocab < 104 {
		return fmt.Errorf("synth: a WordPiece vocabulary needs at least 104 tokens, have %d", s.Vocab)
	}
	tokens := make([]string, s.Vocab)
	types := make([]int32, s.Vocab)
	for i := range tokens {
		tokens[i] = "w" + strconv.FormatInt(int64(i), 36)
		if i%2 == 1 {
			tokens[i] = "##" + tokens[i]
		}
		types[i] = 1
	}
	for id, text := range map[int]string{0: "[PAD]", 100: "[UNK]", 101: "[CLS]", 102: "[SEP]", 103: "[MASK]"} {
		tokens[id], types[id] = text, 3
	}
	b.Set("tokenizer.ggml.model", gguf.StringValue("bert"))
	b.Set("tokenizer.ggml.tokens", gguf.StringsValue(tokens))
	b.Set("tokenizer.ggml.token_type", gguf.Int32sValue(types))
	b.Set("tokenizer.ggml.token_type_count", gguf.Uint32Value(uint32(tokenTypes)))
	b.Set("tokenizer.ggml.bos_token_id", gguf.Uint32Value(101))
	b.Set("tokenizer.ggml.seperator_token_id", gguf.Uint32Value(102))
	b.Set("tokenizer.ggml.unknown_token_id", gguf.Uint32Value(100))
	b.Set("tokenizer.ggml.padding_token_id", gguf.Uint32Value(0))
	b.Set("tokenizer.ggml.mask_token_id", gguf.Uint32Value(103))
	return nil
}
