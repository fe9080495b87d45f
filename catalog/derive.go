package catalog

import (
	"fmt"

	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/synth"
)

// Derived planner inputs. An entry whose variant has never been locked is
// planned from the header synth would write for its shape and quantization
// recipe: the same tensors, types and shapes as synth.Build, in the order
// llama-quantize writes a quantized file (synth.QuantizerOrder). synth.Build
// also writes a made-up tokenizer of the real vocabulary size (hundreds of
// thousands of strings and merges), which costs 50-300 ms a model and is
// no planner input, so deriveModel builds the shape with a small
// vocabulary and then gives the two vocabulary-sized tensors (token_embd
// and output) and the tokenizer's token count their real size. The test
// TestDeriveMatchesSynth holds this equal to synth.Build's header, tensor
// by tensor.

// smallVocab is the vocabulary deriveModel builds with: enough for synth's
// 256 special (BPE) or 259 byte-and-control (SPM) tokens.
const smallVocab = 512

// DeriveModel returns the header synth would build for the shape under the
// recipe, without its tokenizer text: tokenizer.ggml.tokens holds the real
// number of (empty) tokens, and the other tokenizer arrays are left out.
// Its size is the tensor data plus this shorter header, so it falls short
// of a real file by the tokenizer's text (a few MiB).
func DeriveModel(s synth.Shape, q synth.Quant) (*gguf.Model, error) {
	return DeriveModelWith(s, q, synth.QuantRules{})
}

// DeriveModelWith is DeriveModel for a file an older llama-quantize made,
// with its rules r.
func DeriveModelWith(s synth.Shape, q synth.Quant, r synth.QuantRules) (*gguf.Model, error) {
	vocab := s.Vocab
	small := s
	small.Vocab = smallVocab
	for id := range s.Specials {
		small.Vocab = max(small.Vocab, id+1)
	}
	if small.Vocab >= vocab {
		small.Vocab = vocab
	}
	b, err := synth.BuildWith(small, q, r)
	if err != nil {
		return nil, err
	}
	f, err := b.Layout()
	if err != nil {
		return nil, err
	}
	arch := f.Architecture()
	meta := f.Metadata[:0:0]
	for _, kv := range f.Metadata {
		switch kv.Key {
		case "tokenizer.ggml.tokens":
			kv.Value = gguf.EmptyStringsValue(vocab)
		case "tokenizer.ggml.merges", "tokenizer.ggml.scores", "tokenizer.ggml.token_type":
			continue
		case arch + ".vocab_size":
			kv.Value = gguf.Uint32Value(uint32(vocab))
		}
		meta = append(meta, kv)
	}
	f.Metadata = meta
	for i := range f.Tensors {
		t := &f.Tensors[i]
		// The tensors with a row per token of the vocabulary: the
		// embedding, the output projection, and Gemma 3n's per-layer
		// embedding table.
		if (t.Name == "token_embd.weight" || t.Name == "output.weight" || t.Name == "per_layer_token_embd.weight") && len(t.Shape) == 2 {
			if t.Shape[1] != uint64(small.Vocab) {
				return nil, fmt.Errorf("catalog: %s of %s has shape %v, expected a vocabulary of %d", t.Name, s.Name, t.Shape, small.Vocab)
			}
			t.Shape = []uint64{t.Shape[0], uint64(vocab)}
			row, ok := t.Type.RowSize(t.Shape[0])
			if !ok {
				return nil, fmt.Errorf("catalog: %s of %s: row of %d is not whole %s blocks", t.Name, s.Name, t.Shape[0], t.Type)
			}
			t.Size = row * uint64(vocab)
		}
	}
	// A quantized variant on the Hub was written by llama-quantize, in
	// its order, which decides the spans llama.cpp maps.
	if q.Quantized() {
		synth.QuantizerOrder(f.Tensors)
	}
	var off uint64
	for i := range f.Tensors {
		t := &f.Tensors[i]
		t.Offset = off
		off += (t.Size + f.Alignment - 1) / f.Alignment * f.Alignment
	}
	// The header shrank by the tokenizer text and the data offset with it;
	// keep the layout's own offset, which is what the shorter header needs.
	f.Size = f.DataOffset + int64(off)
	return gguf.NewModel(f)
}
