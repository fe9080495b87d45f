package plan

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
)

// flashAuto is how -fa auto resolves (llama_context::resolve_fused_ops):
// flash attention stays on unless a layer's FLASH_ATTN_EXT would run on
// another device than the layer because that device cannot run it. The
// CPU and the Vulkan builds measured here run every case headroom plans;
// CUDA and ROCm (ggml_cuda_get_best_fattn_kernel) refuse some: cudaFlash.
func flashAuto(m *arch.Model, typeK, typeV gguf.GGMLType, gpus []Device, layerDev []string) bool {
	for i, l := range m.Layers {
		if i >= len(layerDev) || l.HeadsKV == 0 {
			continue
		}
		for _, g := range gpus {
			if g.Name != layerDev[i] || (g.Backend != "CUDA" && g.Backend != "ROCm") {
				continue
			}
			if !cudaFlash(m, l, typeK, typeV) {
				return false
			}
		}
	}
	return true
}

// cudaFlash is whether CUDA has a flash-attention kernel for layer l with
// these cache types: K and V of one type (release builds leave
// GGML_CUDA_FA_ALL_QUANTS off), each F32, F16, BF16, Q4_0 or Q8_0, and
// head sizes it has kernels for (equal K and V of 40 to 256 or 512; K 576
// with V 512 for MLA; 192/128 and 320/256 only with the grouped-query
// path, at 8 and 32 query heads per KV head).
func cudaFlash(m *arch.Model, l arch.Layer, typeK, typeV gguf.GGMLType) bool {
	if typeK != typeV {
		return false
	}
	switch typeK {
	case gguf.TypeF32, gguf.TypeF16, gguf.TypeBF16, gguf.TypeQ4_0, gguf.TypeQ8_0:
	default:
		return false
	}
	if m.MLA {
		return true // K 576, V 512: every MLA model has several heads
	}
	gqa := m.NHead / max(l.HeadsKV, 1)
	headK, headV := l.KDim/l.HeadsKV, l.VDim/l.HeadsKV
	switch headK {
	case 40, 64, 72, 80, 96, 112, 128, 256, 512:
		return headV == headK && (headK != 512 || gqa >= 2)
	case 192:
		return headV == 128 && gqa >= 2 && gqa%8 == 0
	case 320:
		return headV == 256 && gqa >= 2 && gqa%32 == 0
	}
	return false
}
