package synth

import (
	"slices"
	"strings"

	"github.com/headroom-llm/headroom/gguf"
)

// QuantizerOrder sorts a header's tensors into the order llama-quantize
// writes them: llama_model_loader's weights_map order, the tensors outside
// the blocks first, then block by block, each group by name
// (weight_name_comparer). synth writes its files in the converter's
// order (the embedding first, the output last), as an F16 conversion is;
// a quantized file on the Hub went through llama-quantize, and where a
// tensor lies decides the spans llama.cpp maps (Metal wires the span of
// the tensors it holds, which then takes in the embedding between the
// output and the first block).
func QuantizerOrder(ts []gguf.TensorInfo) {
	slices.SortStableFunc(ts, func(a, b gguf.TensorInfo) int {
		la, lb := blockOf(a.Name), blockOf(b.Name)
		if la != lb {
			return la - lb
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// Quantized says whether files of recipe q come from llama-quantize
// rather than straight from the converter.
func (q Quant) Quantized() bool { return q != F16 }
