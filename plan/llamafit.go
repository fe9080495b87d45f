package plan

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
)

// LlamaFit is the result llama.cpp's own --fit would reach, by its rules
// (common/fit.cpp), with headroom's accountant in place of its virtual
// loads. It exists to compare plans: headroom's must keep at least the
// context and GPU layers llama.cpp's fit keeps.
type LlamaFit struct {
	Ctx       int  `json:"ctx"`
	GPULayers int  `json:"gpu_layers"`
	Fits      bool `json:"fits"`
	// CPUMoE is how many layers keep their routed experts in system
	// memory, when the fit placed a mixture of experts dense-first.
	CPUMoE int `json:"cpu_moe_layers,omitempty"`
}

// FitLikeLlamaCpp applies llama.cpp's fit steps for a model left at its
// defaults (-c 0, -ngl auto): keep the trained context and every layer if
// that leaves the target free; otherwise reduce the context, in steps of
// 256 cells per stream but not below the minimum, with every layer on the
// GPUs; otherwise, at the minimum context, fill layers back to front (on
// several devices, each device in turn from the last), a mixture of
// experts dense-first (routed experts of the first layers in system
// memory, counted in CPUMoE). Where
// llama.cpp interpolates between measurements, this searches exactly, so it
// finds at least what llama.cpp finds.
func FitLikeLlamaCpp(m *arch.Model, s *hw.Snapshot, parallel, minCtx int, target int64) LlamaFit {
	cpu, gpus := Devices(s)
	base := Defaults()
	// llama.cpp's fit measures the load alone (common/fit.cpp): no prompt cache,
	// checkpoints or process.
	base.loadOnly = true
	base.Parallel, base.KVUnified = max(parallel, 1), false
	all := GPULayersAuto
	if len(gpus) == 0 {
		all = 0
	}
	fitsMoE := func(ctx, ngl, moe int) bool {
		p := base
		p.Ctx, p.GPULayers, p.CPUMoE = ctx*base.Parallel, ngl, moe
		a, err := assessOnce(m, p, s, cpu, gpus)
		return err == nil && a.Verdict == Fits && a.LeastMargin() >= target
	}
	fits := func(ctx, ngl int) bool { return fitsMoE(ctx, ngl, 0) }
	train := m.CtxTrain
	if train <= 0 {
		train = minCtx
	}
	minCtx = min(minCtx, train)
	full := m.NLayer + 1
	if len(gpus) == 0 {
		full = 0
	}
	if fits(train, all) {
		return LlamaFit{Ctx: train, GPULayers: full, Fits: true}
	}
	// Reduce the context with every layer on the GPUs.
	lo, hi := minCtx/256, train/256
	if fits(lo*256, all) {
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if fits(mid*256, all) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		return LlamaFit{Ctx: lo * 256, GPULayers: full, Fits: true}
	}
	// Fill layers at the minimum context, back to front over several
	// devices as fit's layer fill does.
	filled := func(ctx, ngl int) bool {
		if fits(ctx, ngl) {
			return true
		}
		p := base
		p.Ctx, p.GPULayers = ctx*base.Parallel, ngl
		a, err := assessOnce(m, p, s, cpu, gpus)
		if err != nil {
			return false
		}
		_, _, ok := fillSplit(newBoundsMemo(m, s, cpu, gpus, target), p, a)
		return ok
	}
	// A mixture of experts is placed dense-first: every layer on the
	// GPUs with its routed experts in system memory, then layers made
	// whole while they fit; the experts of the remaining layers stay in
	// system memory.
	if m.NExpert > 0 && len(gpus) > 0 && !fits(minCtx, all) && fitsMoE(minCtx, full, m.NLayer) {
		lo, hi := 1, m.NLayer
		for lo < hi {
			mid := (lo + hi) / 2
			if fitsMoE(minCtx, full, mid) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		return LlamaFit{Ctx: minCtx, GPULayers: full, Fits: true, CPUMoE: lo}
	}
	nlo, nhi := -1, full
	for nlo < nhi {
		mid := (nlo + nhi + 1) / 2
		if filled(minCtx, mid) {
			nlo = mid
		} else {
			nhi = mid - 1
		}
	}
	if nlo < 0 {
		return LlamaFit{Ctx: minCtx}
	}
	return LlamaFit{Ctx: minCtx, GPULayers: nlo, Fits: true}
}
