package plan

import (
	"slices"
	"sort"

	"github.com/headroom-llm/headroom/arch"
)

// placeLayers assigns blocks 0..n-1 and the output layer (index n) to
// devices with llama.cpp's rule: -ngl k offloads the output layer and the
// last k-1 blocks, split across GPUs by cumulative normalized shares.
func placeLayers(nLayer, ngl int, split []float64, gpus []Device, cpu string) []string {
	out := make([]string, nLayer+1)
	for i := range out {
		out[i] = cpu
	}
	if len(gpus) == 0 {
		return out
	}
	if ngl < 0 {
		ngl = nLayer + 1
	}
	start := max(nLayer+1-ngl, 0)
	act := min(ngl, nLayer+1)
	// llama.cpp's load_tensors works in float32, summing the shares
	// before it divides: a layer exactly on a boundary (39 of 65 with
	// five equal shares, 0.6f both ways) lands where float32 puts it,
	// which float64 arithmetic on divided shares does not reproduce.
	// A split of all zeros is the default split, by free memory.
	given := slices.ContainsFunc(split, func(x float64) bool { return x != 0 })
	cum := make([]float32, len(gpus))
	var sum float32
	for i := range gpus {
		var share float32
		switch {
		case given && i < len(split):
			share = float32(split[i])
		case !given:
			share = float32(max(gpus[i].Free, 0))
		}
		sum += share
		cum[i] = sum
	}
	if sum == 0 {
		// No device reports memory: llama.cpp falls back on the host's
		// for each, an equal split.
		for i := range cum {
			cum[i] = float32(i + 1)
		}
		sum = float32(len(cum))
	}
	for i := range cum {
		cum[i] /= sum
	}
	for il := start; il < start+act; il++ {
		frac := float32(il-start) / float32(act)
		g := sort.Search(len(cum), func(i int) bool { return cum[i] > frac }) // upper_bound
		g = min(g, len(gpus)-1)
		out[il] = gpus[g].Name
	}
	return out
}

// loadStaging is the read buffer a load without mmap holds for the
// largest weight bound for the CPU's repack buffer, which ggml cannot
// read into directly (it is not a host buffer); nil under mmap, where the
// repack reads from the mapped file. Weights for a GPU go through small
// pinned buffers or the same kind of read buffer; they are not counted
// yet.
func loadStaging(m *arch.Model, p Profile, cpu Device, gpus []Device, layerDev []string) *Buffer {
	if p.Mmap {
		return nil
	}
	ld := newLoader(m, p, cpu, gpus, layerDev)
	var largest int64
	for _, t := range m.Tensors {
		if p.loads(t) && ld.buffer(t).buft == "CPU_REPACK" {
			largest = max(largest, int64(t.Size))
		}
	}
	if largest == 0 {
		return nil
	}
	return &Buffer{Device: cpu.Name, BufferType: "CPU", Kind: KindStaging, Bytes: largest,
		Note: "during the load only: the read buffer of the largest weight that is repacked"}
}
