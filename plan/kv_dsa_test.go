package plan

import (
	"testing"

	"github.com/headroom-llm/headroom/synth"
)

// TestIndexerCache holds DeepSeek Sparse Attention's indexer key cache,
// a second KV buffer after the MLA one, to what llama-server 80fb11a and
// de3ff81 logged for deepseek-v3.2-5l (conformance/testdata/server*/
// deepseek-v3.2-5l.*.json): arch does not model deepseek32 yet (its
// compute graph is not replayed), so the layers are V3.1's, whose MLA
// cache is V3.2's, given V3.2's 128-wide indexer key row.
func TestIndexerCache(t *testing.T) {
	s, ok := synth.Lookup("deepseek-v3.1-5l")
	if !ok {
		t.Fatal("no deepseek-v3.1-5l shape")
	}
	m := shapeQuantModel(t, s, synth.Q5_K_M)
	for i := range m.Layers {
		m.Layers[i].IndexKDim = 128
	}
	for _, c := range []struct {
		ctx, slots   int
		fa           FlashAttn
		cache        string
		mla, indexer float64 // MiB, as logged
	}{
		{4096, 1, FlashOff, "f16", 22.50, 5.00},
		{8192, 1, FlashOn, "f16", 45.00, 10.00},
		{8192, 2, FlashOn, "q8_0", 23.91, 5.31},
	} {
		p := Defaults()
		p.Ctx, p.Parallel, p.FlashAttn, p.CacheK, p.CacheV = c.ctx, c.slots, c.fa, c.cache, c.cache
		r, err := Account(m, p, Device{Name: "CPU", Backend: "CPU"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var kv []int64
		for _, b := range r.Buffers {
			if b.Kind == KindKV {
				kv = append(kv, b.Bytes)
			}
		}
		if len(kv) != 2 || !printedMiB(kv[0], c.mla) || !printedMiB(kv[1], c.indexer) {
			t.Errorf("-c %d -np %d %s: KV buffers %v bytes, want the MLA cache's %.2f MiB then the indexer's %.2f", c.ctx, c.slots, c.cache, kv, c.mla, c.indexer)
		}
	}
}
