package plan

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/graph"
)

// kvBuffers sizes the KV caches (src/llama-kv-cache.cpp): per layer with
// attention, a K tensor of row_size(type_k, KDim) x cells x streams and a
// V tensor likewise, on the layer's device unless -nkvo keeps them on the
// CPU. Sliding-window layers get their own, smaller cache, and llama.cpp
// logs each cache's buffers separately, so they are separate here too.
func kvBuffers(m *arch.Model, c graph.Context, p Profile, cpu Device, gpus []Device, layerDev []string) []Buffer {
	full := map[string]int64{}
	swa := map[string]int64{}
	// DeepSeek Sparse Attention's indexer keys: a second cache, allocated
	// after the MLA one (llama_kv_cache_dsa), K only in the K type.
	index := map[string]int64{}
	// largest is each device's largest K or V tensor (one per layer, all
	// streams): llama.cpp aborts the load when a device cannot run an op
	// on one (Vulkan's maxStorageBufferRange), which the tally checks.
	largest := map[string]int64{}
	var order []string
	seen := map[string]bool{}
	// With a transposed V (no flash attention) every layer's V rows are as
	// wide as the widest layer's.
	maxV := 0
	for _, l := range m.Layers {
		maxV = max(maxV, l.VDim)
	}
	swaCells := c.SWACells(m.Window)
	nextNWithoutKV := p.rules().NextNWithoutKV
	for i, l := range m.Layers {
		if l.Attention == arch.NoAttention {
			continue
		}
		if nextNWithoutKV && i >= m.NLayer-m.NextN {
			continue
		}
		dev := layerDev[i]
		if p.NoKVOffload {
			dev = cpu.Name
		}
		if !seen[dev] {
			seen[dev] = true
			order = append(order, dev)
		}
		cells := int64(c.NCtxSeq)
		target := full
		if l.Attention == arch.Sliding {
			cells = int64(swaCells)
			target = swa
		}
		k, _ := c.TypeK.RowSize(uint64(l.KDim))
		bytes := int64(k) * cells * int64(c.NStream)
		largest[dev] = max(largest[dev], bytes)
		if l.VDim > 0 {
			w := l.VDim
			if c.VTrans {
				w = maxV
			}
			v, _ := c.TypeV.RowSize(uint64(w))
			vBytes := int64(v) * cells * int64(c.NStream)
			largest[dev] = max(largest[dev], vBytes)
			bytes += vBytes
		}
		target[dev] += bytes
		if l.IndexKDim > 0 {
			ik, _ := c.TypeK.RowSize(uint64(l.IndexKDim))
			index[dev] += int64(ik) * cells * int64(c.NStream)
		}
	}
	var out []Buffer
	for _, caches := range []map[string]int64{full, index, swa} {
		for _, dev := range order {
			if n, ok := caches[dev]; ok {
				out = append(out, Buffer{Device: dev, BufferType: bufferTypeOn(dev, gpus), Kind: KindKV, Bytes: n, Largest: largest[dev]})
			}
		}
	}
	return out
}

// rsBuffers sizes the recurrent state (src/llama-memory-recurrent.cpp):
// per recurrent layer, an R (conv) and an S (scan) tensor of float32, one
// row per sequence, on the layer's device unless -nkvo keeps them on the
// CPU.
func rsBuffers(m *arch.Model, c graph.Context, p Profile, cpu Device, gpus []Device, layerDev []string) []Buffer {
	rows := int64(max(1, c.NSeq)) * int64(1+c.NRSSeq)
	sums := map[string]int64{}
	var order []string
	for i, l := range m.Layers {
		if !l.Recurrent {
			continue
		}
		dev := layerDev[i]
		if p.NoKVOffload {
			dev = cpu.Name
		}
		if _, ok := sums[dev]; !ok {
			order = append(order, dev)
		}
		sums[dev] += 4 * int64(l.RDim+l.SDim) * rows
	}
	var out []Buffer
	for _, dev := range order {
		out = append(out, Buffer{Device: dev, BufferType: bufferTypeOn(dev, gpus), Kind: KindRS, Bytes: sums[dev]})
	}
	return out
}
