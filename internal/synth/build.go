package synth

import (
	"fmt"
	"strconv"

	"github.com/headroom-llm/headroom/gguf"
)

// Build assembles the GGUF header of shape s under recipe q, with every
// tensor left as a hole.
func Build(s Shape, q Quant) (*gguf.Builder, error) {
	if _, ok := fileType[q]; !ok {
		return nil, fmt.Errorf("synth: unknown quantization %q", q)
	}
	if s.Layers <= 0 || s.Embd <= 0 || s.Heads <= 0 || s.HeadsKV <= 0 || s.FF <= 0 || s.Vocab <= 0 {
		return nil, fmt.Errorf("synth: shape %q has a zero dimension", s.Name)
	}
	headDim := s.HeadDim
	if headDim == 0 {
		headDim = s.Embd / s.Heads
	}
	b := gguf.NewBuilder()
	a := s.Arch
	b.Set("general.architecture", gguf.StringValue(a))
	b.Set("general.name", gguf.StringValue(s.Name))
	b.Set("general.file_type", gguf.Uint32Value(fileType[q]))
	b.Set("general.quantization_version", gguf.Uint32Value(2))
	b.Set(a+".context_length", gguf.Uint32Value(uint32(s.CtxTrain)))
	b.Set(a+".embedding_length", gguf.Uint32Value(uint32(s.Embd)))
	b.Set(a+".block_count", gguf.Uint32Value(uint32(s.Layers)))
	b.Set(a+".feed_forward_length", gguf.Uint32Value(uint32(s.FF)))
	b.Set(a+".attention.head_count", gguf.Uint32Value(uint32(s.Heads)))
	b.Set(a+".attention.head_count_kv", gguf.Uint32Value(uint32(s.HeadsKV)))
	b.Set(a+".rope.freq_base", gguf.Float32Value(s.RopeTheta))
	b.Set(a+".attention.layer_norm_rms_epsilon", gguf.Float32Value(s.NormEps))
	if headDim != s.Embd/s.Heads {
		b.Set(a+".attention.key_length", gguf.Uint32Value(uint32(headDim)))
		b.Set(a+".attention.value_length", gguf.Uint32Value(uint32(headDim)))
	}
	if a == "llama" {
		b.Set(a+".vocab_size", gguf.Uint32Value(uint32(s.Vocab)))
		b.Set(a+".rope.dimension_count", gguf.Uint32Value(uint32(headDim)))
	}
	if err := tokenizer(b, s); err != nil {
		return nil, err
	}

	t := &tensors{b: b, q: q, layers: s.Layers}
	llama3 := s.Tokenizer == "gpt2" && a == "llama"
	if llama3 {
		t.add("rope_freqs.weight", "norm", -1, headDim/2)
	}
	t.add("token_embd.weight", "token_embd", -1, s.Embd, s.Vocab)
	qDim, kvDim := s.Heads*headDim, s.HeadsKV*headDim
	for i := range s.Layers {
		p := "blk." + strconv.Itoa(i) + "."
		t.add(p+"attn_norm.weight", "norm", i, s.Embd)
		t.add(p+"attn_q.weight", "attn_q", i, s.Embd, qDim)
		t.add(p+"attn_k.weight", "attn_k", i, s.Embd, kvDim)
		t.add(p+"attn_v.weight", "attn_v", i, s.Embd, kvDim)
		if s.QKVBias {
			t.add(p+"attn_q.bias", "norm", i, qDim)
			t.add(p+"attn_k.bias", "norm", i, kvDim)
			t.add(p+"attn_v.bias", "norm", i, kvDim)
		}
		if s.QKNorm {
			t.add(p+"attn_q_norm.weight", "norm", i, headDim)
			t.add(p+"attn_k_norm.weight", "norm", i, headDim)
		}
		t.add(p+"attn_output.weight", "attn_output", i, qDim, s.Embd)
		t.add(p+"ffn_norm.weight", "norm", i, s.Embd)
		t.add(p+"ffn_gate.weight", "ffn_gate", i, s.Embd, s.FF)
		t.add(p+"ffn_up.weight", "ffn_up", i, s.Embd, s.FF)
		t.add(p+"ffn_down.weight", "ffn_down", i, s.FF, s.Embd)
	}
	t.add("output_norm.weight", "norm", -1, s.Embd)
	if !s.TiedOutput {
		t.add("output.weight", "output", -1, s.Embd, s.Vocab)
	}
	return b, t.err
}

type tensors struct {
	b      *gguf.Builder
	q      Quant
	layers int
	err    error
}

// add appends a tensor, choosing its type from the recipe. Norms and biases
// stay F32, and a row that is not a whole number of blocks falls back to a
// type that fits, as llama.cpp's quantizer does.
func (t *tensors) add(name, role string, layer int, dims ...int) {
	if t.err != nil {
		return
	}
	shape := make([]uint64, len(dims))
	for i, d := range dims {
		shape[i] = uint64(d)
	}
	typ := gguf.TypeF32
	if role != "norm" {
		typ = t.q.weight(role, layer, t.layers)
		for _, fallback := range []gguf.GGMLType{typ, gguf.TypeQ8_0, gguf.TypeF16} {
			if _, ok := fallback.RowSize(shape[0]); ok {
				typ = fallback
				break
			}
		}
	}
	t.err = t.b.AddTensor(name, typ, shape, nil)
}

// tokenizer writes a vocabulary of the real size with made-up token text of
// realistic length, so the header is as long as the real one.
func tokenizer(b *gguf.Builder, s Shape) error {
	tokens := make([]string, s.Vocab)
	types := make([]int32, s.Vocab)
	switch s.Tokenizer {
	case "gpt2":
		for i := range tokens {
			tokens[i] = "Ġt" + strconv.FormatInt(int64(i), 36)
			types[i] = 1
		}
		// Control tokens live at the top of the vocabulary in both the
		// Llama 3 and Qwen families.
		const specials = 256
		for i := s.Vocab - specials; i < s.Vocab; i++ {
			tokens[i] = "<|special_" + strconv.Itoa(i) + "|>"
			types[i] = 3
		}
		merges := make([]string, 0, s.Vocab*2)
		for i := 0; len(merges) < cap(merges); i++ {
			merges = append(merges, "Ġt"+strconv.FormatInt(int64(i%s.Vocab), 36)+" "+strconv.FormatInt(int64(i), 36))
		}
		pre := "llama-bpe"
		if s.Arch != "llama" {
			pre = "qwen2"
		}
		b.Set("tokenizer.ggml.model", gguf.StringValue("gpt2"))
		b.Set("tokenizer.ggml.pre", gguf.StringValue(pre))
		b.Set("tokenizer.ggml.tokens", gguf.StringsValue(tokens))
		b.Set("tokenizer.ggml.token_type", gguf.Int32sValue(types))
		b.Set("tokenizer.ggml.merges", gguf.StringsValue(merges))
		b.Set("tokenizer.ggml.bos_token_id", gguf.Uint32Value(uint32(s.Vocab-specials)))
		b.Set("tokenizer.ggml.eos_token_id", gguf.Uint32Value(uint32(s.Vocab-specials+1)))
	case "llama":
		// SentencePiece: <unk>, <s>, </s>, then the 256 byte tokens that
		// llama.cpp requires, then ordinary pieces.
		if s.Vocab < 3+256 {
			return fmt.Errorf("synth: an SPM vocabulary needs at least 259 tokens, have %d", s.Vocab)
		}
		scores := make([]float32, s.Vocab)
		tokens[0], tokens[1], tokens[2] = "<unk>", "<s>", "</s>"
		types[0], types[1], types[2] = 2, 3, 3
		for i := range 256 {
			tokens[3+i] = fmt.Sprintf("<0x%02X>", i)
			types[3+i] = 6
		}
		for i := 259; i < s.Vocab; i++ {
			tokens[i] = "▁p" + strconv.FormatInt(int64(i), 36)
			types[i] = 1
			scores[i] = -float32(i)
		}
		b.Set("tokenizer.ggml.model", gguf.StringValue("llama"))
		b.Set("tokenizer.ggml.tokens", gguf.StringsValue(tokens))
		b.Set("tokenizer.ggml.scores", gguf.Float32sValue(scores))
		b.Set("tokenizer.ggml.token_type", gguf.Int32sValue(types))
		b.Set("tokenizer.ggml.bos_token_id", gguf.Uint32Value(1))
		b.Set("tokenizer.ggml.eos_token_id", gguf.Uint32Value(2))
		b.Set("tokenizer.ggml.unknown_token_id", gguf.Uint32Value(0))
	default:
		return fmt.Errorf("synth: unknown tokenizer %q (have gpt2, llama)", s.Tokenizer)
	}
	return nil
}
