package synth

import (
	"fmt"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

// TestFirstLayers cuts every built-in shape to a few layers and builds its
// header and tensors, with n blocks (and the MTP blocks after them). Only
// a cut that leaves no layer beside the NextN blocks is refused.
func TestFirstLayers(t *testing.T) {
	for _, name := range Names() {
		full, _ := Lookup(name)
		for _, n := range []int{1, 2, 4, 8, full.Layers} {
			if n > full.Layers {
				continue
			}
			t.Run(fmt.Sprintf("%s/%d", name, n), func(t *testing.T) {
				s, err := full.FirstLayers(n)
				if err != nil {
					if full.MoE != nil && n <= full.MoE.NextN {
						return
					}
					t.Fatal(err)
				}
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("building %d layers panics: %v", n, r)
					}
				}()
				b := gguf.NewBuilder()
				metadata(b, s, Q4_K_M)
				list, _ := typedTensors(s, Q4_K_M, QuantRules{})
				blocks := map[int]bool{}
				for _, p := range list {
					if i := blockOf(p.name); i >= 0 {
						blocks[i] = true
					}
				}
				if want := n + s.mtp(); len(blocks) != want {
					t.Errorf("%d blocks, want %d", len(blocks), want)
				}
			})
		}
	}
}

func TestFirstLayersRefuses(t *testing.T) {
	s, _ := Lookup("qwen3-0.6b")
	for _, n := range []int{0, -1, s.Layers + 1} {
		if _, err := s.FirstLayers(n); err == nil {
			t.Errorf("FirstLayers(%d) of %d layers: no error", n, s.Layers)
		}
	}
}
