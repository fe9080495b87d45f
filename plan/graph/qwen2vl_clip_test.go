package graph

import (
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/synth"
)

// TestQwenProjectorHostile checks that a Qwen header whose tensors are
// missing or misshapen is replayed only where the graph can be built,
// and never panics: each tensor in turn left out, cut to one dimension
// or grown by one in each dimension.
func TestQwenProjectorHostile(t *testing.T) {
	for _, typ := range []string{"qwen2.5vl_merger", "qwen2vl_merger"} {
		v := synth.Vision{ImageSize: 560, PatchSize: 14, Embd: 64, FF: 128, Heads: 4, Blocks: 2, TextEmbd: 96, Type: typ}
		if typ == "qwen2.5vl_merger" {
			v.WindowPattern = 2
		}
		p, err := synth.ProjectorModel(v, gguf.TypeF16)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ProjectorGraph(p, true); !ok {
			t.Fatalf("%s: no replay of a well-formed header", typ)
		}
		for i, tn := range p.Tensors {
			var variants [][]gguf.Tensor
			others := append(append([]gguf.Tensor{}, p.Tensors[:i]...), p.Tensors[i+1:]...)
			variants = append(variants, others)
			for d := range tn.Shape {
				grown := tn
				grown.Shape = append([]uint64{}, tn.Shape...)
				grown.Shape[d]++
				variants = append(variants, append(append([]gguf.Tensor{}, others...), grown))
			}
			flat := tn
			flat.Shape = []uint64{tn.Shape[0]}
			variants = append(variants, append(append([]gguf.Tensor{}, others...), flat))
			for _, ts := range variants {
				q := *p
				q.Tensors = ts
				for _, flash := range []bool{true, false} {
					ProjectorGraph(&q, flash)
				}
			}
		}
		for _, bad := range []func(*arch.VisionEncoder){
			func(v *arch.VisionEncoder) { v.Heads = 0 },
			func(v *arch.VisionEncoder) { v.Heads = 3 },
			func(v *arch.VisionEncoder) { v.SpatialMerge = 3 },
			func(v *arch.VisionEncoder) { v.WindowPattern = -1 },
			func(v *arch.VisionEncoder) { v.Blocks = 3 },
		} {
			q := *p
			enc := *p.Vision
			bad(&enc)
			q.Vision = &enc
			if _, ok := ProjectorGraph(&q, true); ok {
				t.Errorf("%s: replayed a header that does not make the graph: %+v", typ, enc)
			}
		}
	}
}
