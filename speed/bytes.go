package speed

import (
	"strings"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan"
)

// traffic is what one generated token reads on one device.
type traffic struct {
	device string
	// layers counts the entries of plan.Result.LayerDevice on the device:
	// the blocks and, where it runs there, the output layer.
	layers int
	// weights are the weight bytes every token reads; kv the cache bytes
	// read at the filled context; state the recurrent state.
	weights, kv, state int64
	// gather is the embedding rows the token looks up (one row each).
	gather int64
	// params are the weight elements a token multiplies, the experts at
	// their routed share: a decode step does 2 FLOPs per element.
	params int64
	// vectors counts the one-dimensional weights applied here (norm
	// scales, biases): one element-wise op each.
	vectors int
}

func (t *traffic) bytes() int64 { return t.weights + t.kv + t.state + t.gather }

// perDevice walks the model's tensors and layers and sums what one token
// reads on each device, in order of first appearance. filled is the number
// of context cells holding tokens when the token is generated.
func perDevice(m *arch.Model, r *plan.Result, filled int, notes *[]string) []*traffic {
	var out []*traffic
	index := map[string]int{}
	at := func(dev string) *traffic {
		if i, ok := index[dev]; ok {
			return out[i]
		}
		index[dev] = len(out)
		out = append(out, &traffic{device: dev})
		return out[len(out)-1]
	}
	cpu := cpuName(r)
	for _, dev := range r.LayerDevice {
		at(dev).layers++
	}
	outDev := r.LayerDevice[m.NLayer]
	routedNoted := false
	for _, t := range m.Tensors {
		switch {
		case t.Layer == arch.InputLayer:
			// The embedding is a lookup (GET_ROWS): one row per token, on
			// the CPU where llama.cpp keeps the input layer.
			at(cpu).gather += int64(rowBytes(t.Tensor.Size, t.Shape))
			if m.TiedOutput && strings.HasPrefix(t.Name, "token_embd.weight") {
				// A tied output projection multiplies the whole embedding
				// matrix on the output layer's device.
				o := at(outDev)
				o.weights += int64(t.Size)
				o.params += int64(t.Elements())
			}
		case t.Layer >= 0 && t.Layer <= m.NLayer:
			d := at(r.LayerDevice[t.Layer])
			if t.Expert && t.Layer < r.CPUMoE {
				d = at(cpu) // --n-cpu-moe: these experts are read from system memory
			}
			size, elems := int64(t.Size), int64(t.Elements())
			if t.Expert {
				n := int64(t.Shape[len(t.Shape)-1])
				used := int64(m.NExpertUsed)
				if used <= 0 || used > n {
					used = n
					if !routedNoted {
						*notes = append(*notes, "expert tensors without a usable expert_used_count are counted as read in full")
						routedNoted = true
					}
				}
				size = size / n * used
				elems = elems / n * used
			}
			d.weights += size
			if len(t.Shape) >= 2 {
				d.params += elems
			} else {
				d.vectors++
			}
		}
	}
	kvOnCPU := kvOffloadDisabled(r)
	c := r.Context
	for i, l := range m.Layers {
		dev := r.LayerDevice[i]
		if kvOnCPU {
			dev = cpu
		}
		if l.Recurrent {
			// The state is read once per token, whatever the context.
			at(dev).state += 4 * int64(l.RDim+l.SDim)
		}
		// A layer attending over another layer's cache (Gemma 3n) reads
		// that cache, where it lives.
		attention := l.Attention
		if l.KVShared {
			attention = m.Layers[l.KVLayer].Attention
			if !kvOnCPU {
				dev = r.LayerDevice[l.KVLayer]
			}
		}
		if attention == arch.NoAttention {
			continue
		}
		cells := filled
		if attention == arch.Sliding && m.Window > 0 {
			cells = min(cells, m.Window)
		}
		k, _ := c.TypeK.RowSize(uint64(l.KDim))
		v, _ := c.TypeV.RowSize(uint64(l.VDim))
		at(dev).kv += int64(k+v) * int64(cells)
	}
	return out
}

// rowBytes is one row of a tensor: its size over the number of rows.
func rowBytes(size uint64, shape []uint64) uint64 {
	rows := uint64(1)
	for _, d := range shape[min(1, len(shape)):] {
		rows *= d
	}
	if rows == 0 {
		return 0
	}
	return size / rows
}

// cpuName is the CPU device of a plan: llama.cpp keeps the input layer
// there, so its model buffer is named after it (CPU_Mapped, CPU).
func cpuName(r *plan.Result) string {
	for _, b := range r.Buffers {
		if b.Kind == "model" && b.Model == "" && strings.HasPrefix(b.BufferType, "CPU") {
			return b.Device
		}
	}
	return "CPU"
}

// kvOffloadDisabled reports whether the plan kept every KV cache on the
// CPU although some layer runs elsewhere (-nkvo). plan.Result does not
// carry the profile, so this reads it from where the buffers landed.
func kvOffloadDisabled(r *plan.Result) bool {
	cpu := cpuName(r)
	kv, offloaded := false, false
	for _, b := range r.Buffers {
		if b.Model != "" {
			continue // a draft's caches say nothing of the main model's
		}
		if b.Kind == "kv" || b.Kind == "rs" {
			kv = true
			if b.Device != cpu {
				return false
			}
		}
	}
	for _, d := range r.LayerDevice {
		if d != cpu {
			offloaded = true
		}
	}
	return kv && offloaded
}
