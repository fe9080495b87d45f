package catalog

import (
	"fmt"
	"sort"

	"github.com/headroom-llm/headroom/plan"
)

// rank orders rows: fitting ones by the goal, then those that do not fit
// (smallest shortfall first), then incompatible ones; ties keep catalog
// order.
//
// quality: the cited score, higher first; configurations without a score
// come after all scored ones; among equal scores (or none), larger models
// first (more active parameters for MoE), then the higher-fidelity
// quantization, then more context. This is a tie-break, not a quality
// claim: the output shows the score as null.
// speed: the estimated decode speed (known estimates first), then model
// size.
// balanced: configurations that decode at least usableTPS tokens per
// second first, the largest model among them (a cited score breaks ties
// between models of one size; scores are cited for only some entries),
// then wholly on the GPU before spilling, then quantization fidelity, then
// context; slower ones after, fastest first.
// context: context per slot, then GPU share, then model size.
func rank(rows []Row, goal string) {
	tier := func(r *Row) int {
		switch {
		case r.Enabled:
			return 0
		case r.Verdict == plan.DoesNotFit:
			return 1
		}
		return 2
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := &rows[i], &rows[j]
		if ta, tb := tier(a), tier(b); ta != tb {
			return ta < tb
		}
		if tier(a) == 1 {
			return a.Limiting.Shortfall < b.Limiting.Shortfall
		}
		if tier(a) == 2 {
			return false
		}
		gpuA, gpuB := gpuShare(a), gpuShare(b)
		sizeA, sizeB := activeB(a), activeB(b)
		switch goal {
		case GoalQuality:
			qa, qb := a.Quality != nil, b.Quality != nil
			if qa != qb {
				return qa
			}
			if qa && a.Quality.Score != b.Quality.Score {
				return a.Quality.Score > b.Quality.Score
			}
			if sizeA != sizeB {
				return sizeA > sizeB
			}
			if fa, fb := fidelity(a.Quant), fidelity(b.Quant); fa != fb {
				return fa > fb
			}
			return a.Plan.CtxPerSlot > b.Plan.CtxPerSlot
		case GoalSpeed:
			da, ka := decode(a)
			db, kb := decode(b)
			if ka != kb {
				return ka
			}
			if da != db {
				return da > db
			}
			return sizeA > sizeB
		case GoalContext:
			if a.Plan.CtxPerSlot != b.Plan.CtxPerSlot {
				return a.Plan.CtxPerSlot > b.Plan.CtxPerSlot
			}
			if gpuA != gpuB {
				return gpuA > gpuB
			}
			return sizeA > sizeB
		}
		da, _ := decode(a)
		db, _ := decode(b)
		if ua, ub := da >= usableTPS, db >= usableTPS; ua != ub {
			return ua
		} else if !ua && da != db {
			return da > db
		}
		// Size first: scores are cited for only some entries, and a
		// missing score says nothing about a model, so it must not rank a
		// small scored model above a large unscored one. Between models
		// of one size, a cited score decides.
		if a.ParamsB != b.ParamsB {
			return a.ParamsB > b.ParamsB
		}
		if a.Quality != nil && b.Quality != nil && a.Quality.Score != b.Quality.Score {
			return a.Quality.Score > b.Quality.Score
		}
		// Of one model, a quantization that runs wholly on the GPU beats a
		// finer one that spills layers to system memory: the spill costs
		// more speed than the finer recipe buys in quality.
		if wa, wb := wholeOnGPU(a), wholeOnGPU(b); wa != wb {
			return wa
		}
		if fa, fb := fidelity(a.Quant), fidelity(b.Quant); fa != fb {
			return fa > fb
		}
		return a.Plan.CtxPerSlot > b.Plan.CtxPerSlot
	})
}

// wholeOnGPU reports whether every layer, the output included, is on a GPU.
func wholeOnGPU(r *Row) bool {
	return r.Plan.LayersTotal > 0 && r.Plan.GPULayers == r.Plan.LayersTotal
}

// decode is a row's estimated decode speed, and whether it is known.
func decode(r *Row) (float64, bool) {
	if r.Speed == nil || r.Speed.DecodeTokensPerSec == nil {
		return 0, false
	}
	return *r.Speed.DecodeTokensPerSec, true
}

// gpuShare is the fraction of layers on the GPU, in tenths so that near
// equal splits tie (1 without any GPU, where nothing can be offloaded).
func gpuShare(r *Row) int {
	if r.Plan.LayersTotal == 0 {
		return 0
	}
	return 10 * r.Plan.GPULayers / r.Plan.LayersTotal
}

func activeB(r *Row) float64 {
	if r.ActiveB != nil {
		return *r.ActiveB
	}
	return r.ParamsB
}

// fidelity orders recipes by bits per weight.
func fidelity(q string) int {
	switch q {
	case "F16":
		return 5
	case "Q8_0":
		return 4
	case "Q6_K":
		return 3
	case "Q5_K_M":
		return 2
	}
	return 1
}

// OrderSays is the rule rank orders fitting rows by for a goal, in one
// line for the listing's screen; it lives beside rank so the two change
// together. gpu says whether the machine has a GPU of its own, without
// which the rule's GPU clauses decide nothing.
func OrderSays(goal string, gpu bool) string {
	switch goal {
	case GoalQuality:
		return "the cited score, highest first; rows without one after it, the largest model first"
	case GoalSpeed:
		return "the estimated decode speed, fastest first"
	case GoalContext:
		if !gpu {
			return "the context per slot, longest first"
		}
		return "the context per slot, longest first, then the most layers on the GPU"
	}
	says := fmt.Sprintf("at least %d tokens/s first, the largest model first among them "+
		"(a cited score between models of one size)", usableTPS)
	if gpu {
		says += ", then the ones wholly on the GPU"
	}
	return says
}
