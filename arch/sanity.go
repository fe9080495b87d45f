package arch

import (
	"fmt"
	"math"
	"strings"
)

// maxExperts is LLAMA_MAX_EXPERTS of the llama.cpp headroom builds
// (src/llama-hparams.h, 1024 since Kimi K3); its loader asserts
// expert_count <= it.
const maxExperts = 1024

// checkHparams refuses the metadata llama.cpp's loader refuses, or that
// would plan a model with no cache where it must hold one: layers of an
// attending architecture with no query or KV heads, KV heads that do not
// divide the query heads, non-finite or non-positive norm epsilons and
// RoPE bases, and expert counts the loader asserts on
// (llama_model_base::load_hparams).
func checkHparams(h hparams, fam family, heads, headsKV []int, a *Model) error {
	for i := range heads {
		q, kv := heads[i], headsKV[i]
		switch {
		case !fam.mixedLayers && q == 0:
			return &Incompatible{Reason: fmt.Sprintf("%sattention.head_count is 0 for layer %d; every layer of %s attends, and llama.cpp refuses its tensors' shapes", h.prefix, i, a.Arch)}
		case !fam.mixedLayers && kv == 0:
			return &Incompatible{Reason: fmt.Sprintf("%sattention.head_count_kv is 0 for layer %d; every layer of %s keeps a KV cache, and llama.cpp refuses its tensors' shapes", h.prefix, i, a.Arch)}
		case kv > 0 && q == 0:
			return &Incompatible{Reason: fmt.Sprintf("%sattention.head_count_kv is %d but head_count is 0 for layer %d", h.prefix, kv, i)}
		case kv > 0 && q%kv != 0:
			return &Incompatible{Reason: fmt.Sprintf("%sattention.head_count %d is not a multiple of head_count_kv %d for layer %d (ggml cannot broadcast the KV heads)", h.prefix, q, kv, i)}
		}
	}
	for _, key := range []string{"attention.layer_norm_rms_epsilon", "attention.layer_norm_epsilon", "rope.freq_base", "rope.freq_base_swa"} {
		f, ok, err := h.float(key)
		if err != nil {
			return err
		}
		if ok && (math.IsNaN(f) || math.IsInf(f, 0) || f <= 0) {
			v, _ := h.m.Lookup(h.prefix + key)
			return &Incompatible{Reason: fmt.Sprintf("%s%s is %s, expected a finite number above 0", h.prefix, key, v)}
		}
	}
	switch n, used := a.NExpert, a.NExpertUsed; {
	case n > maxExperts:
		return &Incompatible{Reason: fmt.Sprintf("%sexpert_count is %d, more than llama.cpp's %d", h.prefix, n, maxExperts)}
	case used > n:
		return &Incompatible{Reason: fmt.Sprintf("%sexpert_used_count %d is more than expert_count %d", h.prefix, used, n)}
	case n > 0 && used == 0:
		return &Incompatible{Reason: fmt.Sprintf("%sexpert_count is %d but expert_used_count is 0 or missing", h.prefix, n)}
	}
	return nil
}

// checkTensors holds the tensors to the shapes llama.cpp's loader creates
// them with where headroom's accounting depends on them, and to the
// tensors it requires (llama_model_loader::create_tensor: "missing
// tensor", "has wrong shape"): the token embedding and output projection
// are n_embd wide and n_vocab long; every used layer has tensors, the
// attention's K and V projections where it keeps a cache, and an FFN
// where it has a width; K and V project to the widths its cache is sized
// by; expert tensors hold expert_count experts, and none exist without
// experts.
func checkTensors(h hparams, a *Model) error {
	shapes := make(map[string][]uint64, len(a.Tensors))
	perLayer := make([]int, a.NLayer)
	for _, t := range a.Tensors {
		shapes[t.Name] = t.Shape
		if t.Layer >= 0 && t.Layer < a.NLayer && strings.HasPrefix(t.Name, "blk.") {
			perLayer[t.Layer]++
		}
	}
	embd, vocab := uint64(a.NEmbd), uint64(a.NVocab)
	if _, ok := shapes["token_embd.weight"]; !ok {
		return &Incompatible{Reason: "missing tensor token_embd.weight (llama.cpp requires it)"}
	}
	for _, name := range []string{"token_embd.weight", "output.weight"} {
		s, ok := shapes[name]
		if !ok {
			continue
		}
		if len(s) != 2 || s[0] != embd || (vocab > 0 && s[1] != vocab) {
			return wrongShape(name, s, fmt.Sprintf("[%d %s]", embd, orAny(vocab)))
		}
	}
	for _, t := range a.Tensors {
		if !t.Expert {
			continue
		}
		if a.NExpert == 0 {
			return &Incompatible{Reason: fmt.Sprintf("tensor %s holds routed experts, but %sexpert_count is 0 or missing", t.Name, h.prefix)}
		}
		if len(t.Shape) == 3 && t.Shape[2] != uint64(a.NExpert) && !strings.Contains(t.Name, "_chexps.") {
			return wrongShape(t.Name, t.Shape, fmt.Sprintf("[%d %d %d]", t.Shape[0], t.Shape[1], a.NExpert))
		}
	}
	first := a.NLayer - a.NextN // NextN blocks are never loaded
	for i, l := range a.Layers {
		if i >= first {
			break
		}
		p := fmt.Sprintf("blk.%d.", i)
		if perLayer[i] == 0 {
			return &Incompatible{Reason: fmt.Sprintf("layer %d has no tensors (missing %s*; llama.cpp requires them)", i, p)}
		}
		if s, ok := shapes[p+"ffn_gate_inp.weight"]; ok && a.NExpert > 0 && (len(s) != 2 || s[0] != embd || s[1] != uint64(a.NExpert)) {
			return wrongShape(p+"ffn_gate_inp.weight", s, fmt.Sprintf("[%d %d]", embd, a.NExpert))
		}
		if err := checkAttention(p, l, shapes, a); err != nil {
			return err
		}
		if l.FF > 0 && !hasAny(shapes, p, "ffn_down.weight", "ffn_down_exps.weight", "ffn_down_chexps.weight") {
			return &Incompatible{Reason: fmt.Sprintf("missing tensor %sffn_down.weight: %sfeed_forward_length gives layer %d an FFN", p, h.prefix, i)}
		}
	}
	return nil
}

// checkAttention checks one layer's K and V projections against the
// widths its cache is sized by.
func checkAttention(p string, l Layer, shapes map[string][]uint64, a *Model) error {
	attends := l.Attention != NoAttention || l.KVShared
	if !attends || a.MLA {
		if a.MLA && l.Attention != NoAttention && !hasAny(shapes, p, "attn_kv_a_mqa.weight") {
			return &Incompatible{Reason: fmt.Sprintf("missing tensor %sattn_kv_a_mqa.weight, which multi-head latent attention caches", p)}
		}
		return nil
	}
	if l.KDim <= 0 || (l.VDim <= 0 && !a.MLA) {
		return &Incompatible{Reason: fmt.Sprintf("layer %d attends with K rows of %d and V rows of %d elements; expected both above 0 (attention.key_length and value_length)", l.Index, l.KDim, l.VDim)}
	}
	// A layer reading another's cache projects no K of its own in Gemma 4
	// (gemma4.cpp creates attn_k not required where has_kv is false);
	// Gemma 3n's still has its weights.
	if !hasAny(shapes, p, "attn_k.weight", "attn_qkv.weight") && !(l.KVShared && a.Arch == "gemma4") {
		return &Incompatible{Reason: fmt.Sprintf("missing tensor %sattn_k.weight (or attn_qkv.weight): layer %d keeps a KV cache", p, l.Index)}
	}
	if !hasAny(shapes, p, "attn_output.weight") {
		return &Incompatible{Reason: fmt.Sprintf("missing tensor %sattn_output.weight (llama.cpp requires it)", p)}
	}
	for name, width := range map[string]int{"attn_k.weight": l.KDim, "attn_v.weight": l.VDim} {
		if s, ok := shapes[p+name]; ok && (len(s) != 2 || s[0] != uint64(a.NEmbd) || s[1] != uint64(width)) {
			return wrongShape(p+name, s, fmt.Sprintf("[%d %d]", a.NEmbd, width))
		}
	}
	return nil
}

func hasAny(shapes map[string][]uint64, prefix string, names ...string) bool {
	for _, n := range names {
		if _, ok := shapes[prefix+n]; ok {
			return true
		}
	}
	return false
}

func wrongShape(name string, got []uint64, want string) error {
	return &Incompatible{Reason: fmt.Sprintf("tensor %s has shape %v, expected %s (llama.cpp refuses a tensor of the wrong shape)", name, got, want)}
}

func orAny(n uint64) string {
	if n == 0 {
		return "any"
	}
	return fmt.Sprint(n)
}
