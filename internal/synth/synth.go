// Package synth writes GGUF files shaped like real models: the exact tensor
// names, shapes and quantization mix llama.cpp expects for an architecture,
// with real hyperparameters and a tokenizer of the real size, but with the
// weights left as a sparse hole. A "70B" file costs a few MiB of disk, and
// llama.cpp loads it (its buffer sizes depend on the header, not the weights),
// which is what the tests and the conformance harness need.
package synth

import (
	"fmt"
	"sort"
	"strings"

	"github.com/headroom-llm/headroom/gguf"
)

// Shape is the architecture and size of a dense decoder-only transformer in
// the llama family (llama, qwen2, qwen3, mistral...).
type Shape struct {
	Name       string // e.g. "Llama-3.1-70B"
	Arch       string // general.architecture
	Layers     int
	Embd       int
	Heads      int
	HeadsKV    int
	HeadDim    int // 0 = Embd/Heads
	FF         int
	Vocab      int
	CtxTrain   int
	RopeTheta  float32
	NormEps    float32
	TiedOutput bool // no output.weight: the embedding is reused
	QKNorm     bool // per-head q/k RMS norms (qwen3)
	QKVBias    bool // q/k/v biases (qwen2)
	// Tokenizer is "gpt2" (BPE with merges) or "llama" (SPM with byte tokens).
	Tokenizer string
	Source    string // where the hyperparameters come from
}

// Shapes lists the built-in shapes by the name Lookup takes. Hyperparameters
// are from each model's published config.json.
var shapes = map[string]Shape{
	"llama-3.1-8b": {Name: "Llama-3.1-8B", Arch: "llama", Layers: 32, Embd: 4096, Heads: 32, HeadsKV: 8, FF: 14336,
		Vocab: 128256, CtxTrain: 131072, RopeTheta: 500000, NormEps: 1e-5, Tokenizer: "gpt2",
		Source: "meta-llama/Llama-3.1-8B config.json"},
	"llama-3.1-70b": {Name: "Llama-3.1-70B", Arch: "llama", Layers: 80, Embd: 8192, Heads: 64, HeadsKV: 8, FF: 28672,
		Vocab: 128256, CtxTrain: 131072, RopeTheta: 500000, NormEps: 1e-5, Tokenizer: "gpt2",
		Source: "meta-llama/Llama-3.1-70B config.json"},
	"llama-3.2-1b": {Name: "Llama-3.2-1B", Arch: "llama", Layers: 16, Embd: 2048, Heads: 32, HeadsKV: 8, HeadDim: 64, FF: 8192,
		Vocab: 128256, CtxTrain: 131072, RopeTheta: 500000, NormEps: 1e-5, TiedOutput: true, Tokenizer: "gpt2",
		Source: "meta-llama/Llama-3.2-1B config.json"},
	"qwen2.5-7b": {Name: "Qwen2.5-7B", Arch: "qwen2", Layers: 28, Embd: 3584, Heads: 28, HeadsKV: 4, FF: 18944,
		Vocab: 152064, CtxTrain: 32768, RopeTheta: 1000000, NormEps: 1e-6, QKVBias: true, Tokenizer: "gpt2",
		Source: "Qwen/Qwen2.5-7B config.json"},
	"qwen3-8b": {Name: "Qwen3-8B", Arch: "qwen3", Layers: 36, Embd: 4096, Heads: 32, HeadsKV: 8, HeadDim: 128, FF: 12288,
		Vocab: 151936, CtxTrain: 40960, RopeTheta: 1000000, NormEps: 1e-6, QKNorm: true, Tokenizer: "gpt2",
		Source: "Qwen/Qwen3-8B config.json"},
	"tinyllama-1.1b": {Name: "TinyLlama-1.1B", Arch: "llama", Layers: 22, Embd: 2048, Heads: 32, HeadsKV: 4, FF: 5632,
		Vocab: 32000, CtxTrain: 2048, RopeTheta: 10000, NormEps: 1e-5, Tokenizer: "llama",
		Source: "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T config.json"},
}

// Names lists the built-in shape names, sorted.
func Names() []string {
	out := make([]string, 0, len(shapes))
	for n := range shapes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Lookup finds a built-in shape by name (case-insensitive).
func Lookup(name string) (Shape, bool) {
	s, ok := shapes[strings.ToLower(name)]
	return s, ok
}

// Quant is a quantization recipe: which ggml type each tensor gets.
type Quant string

// The recipes synth knows. They follow the rules of llama.cpp's quantizer
// closely enough to give a realistic mix; they need not match a given
// release byte for byte, since the files are read for their headers.
const (
	F16    Quant = "F16"
	Q8_0   Quant = "Q8_0"
	Q4_K_M Quant = "Q4_K_M"
)

// fileType is general.file_type (enum llama_ftype) for each recipe.
var fileType = map[Quant]uint32{F16: 1, Q8_0: 7, Q4_K_M: 15}

// ParseQuant accepts a recipe name, ignoring case.
func ParseQuant(s string) (Quant, error) {
	for q := range fileType {
		if strings.EqualFold(string(q), s) {
			return q, nil
		}
	}
	return "", fmt.Errorf("synth: unknown quantization %q (have F16, Q8_0, Q4_K_M)", s)
}

// moreBits is llama.cpp's use_more_bits: the first and last eighth of the
// layers, and every third layer between, get a larger type in _M recipes.
func moreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}

func (q Quant) weight(role string, layer, layers int) gguf.GGMLType {
	switch q {
	case F16:
		return gguf.TypeF16
	case Q8_0:
		return gguf.TypeQ8_0
	}
	switch role {
	case "output":
		return gguf.TypeQ6_K
	case "attn_v", "ffn_down":
		if moreBits(layer, layers) {
			return gguf.TypeQ6_K
		}
	}
	return gguf.TypeQ4_K
}
