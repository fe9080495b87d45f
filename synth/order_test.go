package synth

import (
	"slices"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

// llama-quantize writes the tensors outside the blocks first, then the
// blocks in numeric order, each group by name (weight_name_comparer).
func TestQuantizerOrder(t *testing.T) {
	in := []string{"token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.10.ffn_up.weight",
		"blk.9.ffn_up.weight", "blk.1.attn_norm.weight", "output_norm.weight", "output.weight", "rope_freqs.weight"}
	want := []string{"output.weight", "output_norm.weight", "rope_freqs.weight", "token_embd.weight",
		"blk.0.attn_k.weight", "blk.0.attn_q.weight", "blk.1.attn_norm.weight", "blk.9.ffn_up.weight", "blk.10.ffn_up.weight"}
	ts := make([]gguf.TensorInfo, len(in))
	for i, n := range in {
		ts[i].Name = n
	}
	QuantizerOrder(ts)
	var got []string
	for _, t := range ts {
		got = append(got, t.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}
