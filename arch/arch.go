// Package arch derives a model's memory semantics from its GGUF metadata:
// for every layer, which cache it holds (full attention, sliding window,
// recurrent state, or none), how many bytes per token or per sequence that
// cache needs, and which tensors belong to which layer. It never infers
// anything from a model's name; an architecture it does not know is
// reported as incompatible rather than guessed.
package arch

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/gguf"
)

// Attention is the kind of attention cache a layer keeps.
type Attention int

const (
	// NoAttention layers keep no KV cache (recurrent-only, MLP-only, or
	// layers that reuse another layer's cache).
	NoAttention Attention = iota
	// Full layers cache every token of the context.
	Full
	// Sliding layers cache a window of recent tokens.
	Sliding
)

func (a Attention) String() string {
	switch a {
	case Full:
		return "full"
	case Sliding:
		return "sliding"
	}
	return "none"
}

// Layer is one repeating block's cache needs.
type Layer struct {
	Index     int
	Attention Attention
	// HeadsKV is the number of KV heads (0 for layers without attention).
	// A layer that attends over another layer's cache (NoAttention, as it
	// allocates none) keeps its heads and KDim/VDim.
	HeadsKV int
	// KDim and VDim are the K and V elements cached per token: head size
	// times KV heads (n_embd_k_gqa and n_embd_v_gqa in llama.cpp). VDim is
	// 0 for MLA, which caches only the compressed K.
	KDim, VDim int
	// KVShared layers attend over layer KVLayer's cache and allocate
	// none of their own (Gemma 3n's last layers): their Attention is
	// NoAttention, their heads and widths those they attend with.
	KVShared bool
	KVLayer  int
	// Recurrent layers keep per-sequence state of RDim (conv) and SDim
	// (scan) float32 elements.
	Recurrent  bool
	RDim, SDim int
	// FF is the feed-forward width of this layer (0 for none).
	FF int
	// IndexKDim is the width of the lightning indexer's key row that a
	// DeepSeek Sparse Attention layer caches beside its MLA latent (one
	// key head: indexer.key_length), in a second cache of its own; 0 for
	// none.
	IndexKDim int
}

// Model is what the accountant needs to know about an architecture.
type Model struct {
	Arch     string
	NLayer   int
	NEmbd    int
	NHead    int // of layer 0; per-layer counts live in Layers
	NVocab   int
	CtxTrain int
	Layers   []Layer
	// Window is the sliding-window size in tokens (0 without SWA).
	Window int
	// MLA is DeepSeek-style multi-head latent attention.
	MLA bool
	// Indexer is DeepSeek Sparse Attention's lightning indexer (deepseek32);
	// nil without one.
	Indexer *Indexer
	// Experts: total, used per token, and each expert's FF width.
	NExpert, NExpertUsed, NFFExpert int
	// ExpertGroups and ExpertGroupsUsed are expert_group_count and
	// expert_group_used_count: with more than one group, build_moe_ffn
	// first keeps the best groups (DeepSeek V3), which adds nodes.
	ExpertGroups, ExpertGroupsUsed int
	// ExpertWeightsNorm (expert_weights_norm) divides the selected
	// experts' weights by their sum; ExpertWeightsScale
	// (expert_weights_scale) other than 0 and 1 multiplies them. Each is
	// a node of the graph.
	ExpertWeightsNorm  bool
	ExpertWeightsScale float64
	// TiedOutput means there is no output.weight: llama.cpp reuses the
	// token embedding as the output projection, loading it a second time.
	TiedOutput bool
	// NextN is how many of the last blocks are NextN (multi-token
	// prediction) heads: counted in NLayer, their weights never loaded.
	NextN int
	// MTPHead is the NextN blocks as llama-server's MTP draft context runs
	// them (--spec-type draft-mtp): gated attention over a cache of their
	// own, one layer each, in Layers' order; nil where headroom does not
	// model that context for the architecture (only Qwen3.5 and 3.6,
	// qwen35 and qwen35moe, whose graph_mtp it replays).
	MTPHead []Layer
	// OutputFirst means the loader creates the tied output before the
	// embedding (gemma3n.cpp), so it finds no embedding to reuse and
	// makes a tensor of its own even in the embedding's buffer type:
	// the same file range under mmap, a second copy without it.
	OutputFirst bool
	// ParallelResidual is gptneox's use_parallel_residual: the attention
	// and the FFN read the same layer input, and both are added to it.
	ParallelResidual bool
	// PosPerEmbd is how many positions a token has, 4 under multi-section
	// RoPE (MROPE and IMROPE: llama_hparams::n_pos_per_embd), else 0 for
	// one: the graph's position input holds that many rows a token.
	PosPerEmbd int
	// FinalSoftcap is gemma4's final_logit_softcapping: the logits are
	// scaled, passed through tanh and scaled back (three more nodes).
	FinalSoftcap bool
	// AttnTempScale is mistral3's attention.temperature_scale: when not
	// 0 its graph multiplies Q by a per-token factor, an input of the
	// graph (build_inp_attn_scale).
	AttnTempScale float64
	// Encoder models (BERT and its kin) attend over the whole
	// micro-batch in both directions and keep no memory between batches:
	// llama_model::create_memory makes none, so every layer is
	// NoAttention with its heads and widths kept for the graph.
	Encoder bool
	// Pooling is the pooling_type the file asks for (llama_pooling_type:
	// 0 none, 1 mean, 2 cls, 3 last, 4 rank), what llama-server pools
	// embeddings by unless --pooling says otherwise.
	Pooling int
	// Tensors are the model's tensors with their layer assignment.
	Tensors []Tensor
}

// Tensor is a weight with the layer llama.cpp assigns it to.
type Tensor struct {
	gguf.Tensor
	// Layer is the block index, InputLayer for the embedding, or
	// OutputLayer (== NLayer) for the output norm and projection.
	Layer int
	// Expert marks routed-expert weights (blk.N.ffn_*_exps), which MoE
	// offload moves independently of their layer.
	Expert bool
	// Unused tensors are in the file but never loaded: the weights of
	// NextN (multi-token prediction) blocks, which llama.cpp's loader
	// creates with TENSOR_SKIP unless the MTP head is requested
	// (llama_model_loader::create_tensor logs "model has unused tensor").
	Unused bool
}

// InputLayer is the layer index of the token embedding, which llama.cpp
// always keeps on the CPU.
const InputLayer = -1

// Incompatible is returned for models headroom cannot account for.
type Incompatible struct {
	Reason string
	// Unmodeled says headroom does not model this architecture, or this
	// variant of one it models, although llama.cpp may load it: the user's
	// own llama.cpp can project it. False for a file that is wrong
	// whatever reads it.
	Unmodeled bool
}

func (e *Incompatible) Error() string { return "incompatible: " + e.Reason }

// IsIncompatible reports whether err says the model cannot be planned.
func IsIncompatible(err error) bool {
	var inc *Incompatible
	return errors.As(err, &inc)
}

// FromGGUF builds the model's memory description from its header, and
// refuses a header llama.cpp's loader refuses where headroom's accounting
// depends on it (checkHparams, checkTensors).
func FromGGUF(m *gguf.Model) (*Model, error) { return fromGGUF(m, true) }

// fromGGUF is FromGGUF, with the tensor checks left out when tensors is
// false (for tests that give a header its tensors after reading it).
func fromGGUF(m *gguf.Model, tensors bool) (*Model, error) {
	name := m.Architecture()
	if name == "" {
		return nil, &Incompatible{Reason: "the file has no general.architecture"}
	}
	fam, ok := families[name]
	if !ok {
		return nil, &Incompatible{Unmodeled: true, Reason: fmt.Sprintf("architecture %q is not one headroom models yet (known: %s)", name, strings.Join(Known(), ", "))}
	}
	return readModel(m, name, fam, tensors)
}

// readModel reads a header of architecture name by its family's rules.
func readModel(m *gguf.Model, name string, fam family, tensors bool) (*Model, error) {
	h := hparams{m: m, prefix: name + "."}
	a := &Model{Arch: name}
	var err error
	if a.NLayer, err = h.need("block_count"); err != nil {
		return nil, err
	}
	if a.NLayer <= 0 || a.NLayer > 4096 {
		return nil, &Incompatible{Reason: fmt.Sprintf("block_count %d is out of range", a.NLayer)}
	}
	if a.NEmbd, err = h.need("embedding_length"); err != nil {
		return nil, err
	}
	a.CtxTrain, _ = h.opt("context_length", 0)
	a.NVocab = vocabSize(m, h)
	if err := layers(h, fam, a); err != nil {
		return nil, err
	}
	if fam.adjust != nil {
		if err := fam.adjust(h, a); err != nil {
			return nil, err
		}
	}
	shareKV(fam, a)
	if err := embedding(h, fam, a); err != nil {
		return nil, err
	}
	placeTensors(m, h, fam, a)
	if tensors {
		if err := checkTensors(h, a); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// layers reads each layer's heads, widths and kind of attention.
func layers(h hparams, fam family, a *Model) error {
	heads, err := h.perLayer("attention.head_count", a.NLayer, 0)
	if err != nil {
		return err
	}
	a.NHead = heads[0]
	headsKV, err := h.perLayer("attention.head_count_kv", a.NLayer, -1)
	if err != nil {
		return err
	}
	for i := range headsKV {
		if headsKV[i] < 0 { // absent: as many KV heads as query heads
			headsKV[i] = heads[i]
		}
	}
	ff, err := h.perLayer("feed_forward_length", a.NLayer, 0)
	if err != nil {
		return err
	}
	headDefault := 0
	if a.NHead > 0 {
		headDefault = a.NEmbd / a.NHead
	}
	headK, _ := h.opt("attention.key_length", headDefault)
	headV, _ := h.opt("attention.value_length", headDefault)
	headKSWA, _ := h.opt("attention.key_length_swa", headK)
	headVSWA, _ := h.opt("attention.value_length_swa", headV)
	a.Window, _ = h.opt("attention.sliding_window", 0)
	if fam.fixedWindow != 0 {
		// llama4: any window but an explicit 0 becomes the hard-coded one.
		if w, ok, _ := h.get("attention.sliding_window"); !ok || w != 0 {
			a.Window = fam.fixedWindow
		}
	}
	if a.NExpert, err = h.opt("expert_count", 0); err != nil {
		return err
	}
	// A count per layer is allowed (get_key_or_arr); the loader checks
	// the largest.
	used, err := h.perLayer("expert_used_count", a.NLayer, 0)
	if err != nil {
		return err
	}
	a.NExpertUsed = slices.Max(used)
	a.NFFExpert, _ = h.opt("expert_feed_forward_length", 0)
	if err := readExpertRouting(h, a); err != nil {
		return err
	}
	kMLA, _ := h.opt("attention.key_length_mla", 0)
	vMLA, _ := h.opt("attention.value_length_mla", 0)
	a.MLA = kMLA != 0 && vMLA != 0

	if err := checkHparams(h, fam, heads, headsKV, a); err != nil {
		return err
	}
	swa, err := fam.slidingLayers(h, a)
	if err != nil {
		return err
	}
	a.Layers = make([]Layer, a.NLayer)
	for i := range a.Layers {
		l := Layer{Index: i, HeadsKV: headsKV[i], FF: ff[i]}
		if heads[i] > 0 && headsKV[i] > 0 {
			l.Attention = Full
			k, v := headK, headV
			if swa != nil && swa[i] {
				l.Attention = Sliding
				k, v = headKSWA, headVSWA
			}
			l.KDim, l.VDim = k*headsKV[i], v*headsKV[i]
			if a.MLA {
				l.VDim = 0 // only the latent K is cached (has_v = !is_mla)
			}
		}
		a.Layers[i] = l
	}
	return nil
}

// shareKV gives the layers past the architecture's kvFromStart no cache of
// their own.
func shareKV(fam family, a *Model) {
	if fam.kvFromStart <= 0 {
		return
	}
	// The later layers keep their heads and widths (the engine's
	// n_embd_v_gqa_max, which pads a transposed V, counts them too)
	// but no cache of their own.
	// They read the last cache of their own kind among the first
	// layers (llama_model::create_memory's reuse callback: n-1 for a
	// global layer, n-2 for a sliding one).
	for i := fam.kvFromStart; i < a.NLayer; i++ {
		l := &a.Layers[i]
		l.KVShared, l.KVLayer = true, fam.kvFromStart-1
		if l.Attention == Sliding {
			l.KVLayer = fam.kvFromStart - 2
		}
		l.Attention = NoAttention
	}
}

// placeTensors lists the model's tensors with their layers: the output
// tensors and the architecture's first-layer ones where it says, and the
// multi-token-prediction blocks' weights unused.
func placeTensors(m *gguf.Model, h hparams, fam family, a *Model) {
	a.Tensors, a.TiedOutput = assignTensors(m, a.NLayer)
	// The last nextn_predict_layers blocks are MTP heads (block_count
	// counts them: llama_hparams::n_layer() = n_layer_all - n_layer_nextn).
	// Their weights are skipped; they still get a device, and whether
	// they get a KV cache is the architecture's memory filter (glm4moe
	// has none, so its cache covers every block).
	nextn, _ := h.opt("nextn_predict_layers", 0)
	a.NextN = int(nextn)
	for i := range a.Tensors {
		if slices.Contains(fam.outputTensors, a.Tensors[i].Name) {
			a.Tensors[i].Layer = a.NLayer
		}
		if slices.Contains(fam.firstLayerTensors, a.Tensors[i].Name) {
			a.Tensors[i].Layer = 0
		}
		if l := a.Tensors[i].Layer; nextn > 0 && l >= a.NLayer-nextn && l < a.NLayer {
			a.Tensors[i].Unused = true
		}
	}
}

// assignTensors gives every tensor its layer as llama.cpp's loader does:
// blk.N.* to layer N, the token embedding to the input layer, the output
// norm and projection to the output layer.
func assignTensors(m *gguf.Model, nLayer int) ([]Tensor, bool) {
	out := make([]Tensor, 0, len(m.Tensors))
	tied := true
	for _, t := range m.Tensors {
		at := Tensor{Tensor: t, Layer: InputLayer}
		switch {
		case strings.HasPrefix(t.Name, "blk."):
			rest := t.Name[len("blk."):]
			if dot := strings.IndexByte(rest, '.'); dot > 0 {
				if n, err := strconv.Atoi(rest[:dot]); err == nil {
					at.Layer = n
				}
			}
			at.Expert = strings.Contains(t.Name, "_exps.") || strings.Contains(t.Name, "_chexps.")
		case strings.HasPrefix(t.Name, "output"):
			at.Layer = nLayer
			if strings.HasPrefix(t.Name, "output.weight") {
				tied = false
			}
		case strings.HasPrefix(t.Name, "cls."):
			// A reranker's pooler and classifier are the output layer's
			// in every architecture (LLM_TENSOR_CLS, CLS_OUT, CLS_NORM).
			at.Layer = nLayer
		case strings.HasPrefix(t.Name, "rope_freqs"):
			// Created as a per-layer tensor of layer 0 and duplicated to
			// the other layers' devices.
			at.Layer = 0
		}
		out = append(out, at)
	}
	return out, tied
}

// vocabSize is the number of tokens: the tokenizer's list, or the
// architecture's vocab_size key when the list is absent.
func vocabSize(m *gguf.Model, h hparams) int {
	if v, ok := m.Lookup("tokenizer.ggml.tokens"); ok {
		if arr, ok := v.AsArray(); ok {
			return arr.Len()
		}
	}
	n, _ := h.opt("vocab_size", 0)
	return n
}

// readExpertRouting reads how the router's weights are turned into the
// selected experts' weights (llama_model::load_hparams).
func readExpertRouting(h hparams, a *Model) error {
	var err error
	if a.ExpertGroups, err = h.opt("expert_group_count", 0); err != nil {
		return err
	}
	if a.ExpertGroupsUsed, err = h.opt("expert_group_used_count", 0); err != nil {
		return err
	}
	if a.ExpertGroups > 1 && (a.NExpert%a.ExpertGroups != 0 || a.ExpertGroupsUsed < 1 || a.ExpertGroupsUsed > a.ExpertGroups) {
		return &Incompatible{Reason: fmt.Sprintf("%sexpert_group_count %d with expert_group_used_count %d does not divide %d experts into groups of which some are used",
			h.prefix, a.ExpertGroups, a.ExpertGroupsUsed, a.NExpert)}
	}
	if v, ok := h.m.Lookup(h.prefix + "expert_weights_norm"); ok {
		b, isBool := v.AsBool()
		if !isBool {
			return &Incompatible{Reason: fmt.Sprintf("%sexpert_weights_norm is %s %v, expected a bool", h.prefix, v.Type(), v)}
		}
		a.ExpertWeightsNorm = b
	}
	scale, _, err := h.float("expert_weights_scale")
	if err != nil {
		return err
	}
	if math.IsNaN(scale) || math.IsInf(scale, 0) {
		return &Incompatible{Reason: fmt.Sprintf("%sexpert_weights_scale is %v, expected a finite number", h.prefix, scale)}
	}
	a.ExpertWeightsScale = scale
	return nil
}
