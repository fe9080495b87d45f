package arch

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/headroom-llm/headroom/gguf"
)

// family holds what differs between architectures. Most differences are
// in the metadata itself; a family only says what llama.cpp hard-codes.
type family struct {
	// swaPattern n marks layer il sliding iff il%n < n-1 (llama.cpp's
	// set_swa_pattern); 0 means the architecture has no hard-coded pattern.
	swaPattern int
	// fixedWindow is a sliding window llama.cpp hard-codes whatever the
	// metadata says, unless attention.sliding_window is 0 (llama4's
	// chunked attention, src/models/llama4.cpp).
	fixedWindow int
	// swaFromKey reads the per-layer pattern from
	// attention.sliding_window_pattern when present.
	swaFromKey bool
	// swaPeriodKey lets a scalar attention.sliding_window_pattern replace
	// swaPattern. llama.cpp reads the key into a uint32 with
	// get_key_or_arr, which ignores an array, so the per-layer bools that
	// converters write leave the hard-coded period in force.
	swaPeriodKey bool
	// kvFromStart n > 0 gives a KV cache to the first n layers only; the
	// later ones attend over an earlier layer's cache and allocate none
	// (llama_hparams::n_layer_kv_from_start and has_kv).
	kvFromStart int
	// mixedLayers says layers may keep no attention (recurrent, short
	// convolution or MLP-only layers, told apart by zero heads); in every
	// other family each layer attends and zero heads are refused.
	mixedLayers bool
	// adjust applies rules that the metadata alone does not express.
	adjust func(h hparams, m *Model) error
	// outputTensors names tensors outside blk.N that belong to the output
	// layer although their names do not start with "output".
	outputTensors []string
	// firstLayerTensors names tensors outside blk.N that llama.cpp creates
	// as layer 0's (a block index in tn() without "blk.%d" in the name), so
	// they live on layer 0's device, not the input layer's.
	firstLayerTensors []string
	// encoder architectures keep no memory (create_memory makes none):
	// see Model.Encoder.
	encoder bool
}

// families lists the architectures headroom accounts for. An architecture
// belongs here only after its rules were checked against llama.cpp's
// source (src/llama-model.cpp, load_hparams and create_memory).
var families = map[string]family{
	"mamba":    {adjust: recurrentAll, mixedLayers: true},
	"mamba2":   {adjust: recurrentAll, mixedLayers: true},
	"lfm2":     {adjust: lfm2, mixedLayers: true, outputTensors: []string{"token_embd_norm.weight"}}, // LFM2's final norm
	"llama":    {},
	"qwen2":    {},
	"qwen3":    {},
	"mistral3": {adjust: mistral3},
	"olmo2":    {},
	// SmolLM3 (src/models/smollm3.cpp): llama's layers and cache; RoPE is
	// skipped on every fourth layer, which changes no buffer's size.
	"smollm3":   {},
	"gemma2":    {swaPattern: 2},
	"gemma3":    {swaPattern: 6, swaFromKey: true},
	"cohere2":   {swaPattern: 4},
	"gpt-oss":   {swaPattern: 2},
	"qwen2moe":  {},
	"qwen3moe":  {},
	"deepseek2": {},
	"phi3":      {},
	// Granite 3 (src/models/granite.cpp): llama's cache, with multipliers
	// that change no tensor (see granite).
	"granite": {adjust: granite},
	// GPT-NeoX (src/models/gptneox.cpp): one KV cache over every layer,
	// partial NEOX RoPE, and a parallel or a sequential residual (see
	// gptneox).
	"gptneox": {adjust: gptneox},
	// Hybrid Mamba-2 / attention (src/models/<arch>.cpp load_arch_hparams
	// and llama_model::create_memory's hybrid layer filters).
	"granitehybrid": {mixedLayers: true, adjust: recurrentWhere(func(l Layer) bool { return l.HeadsKV == 0 })},
	"nemotron_h":    {mixedLayers: true, adjust: recurrentWhere(func(l Layer) bool { return l.HeadsKV == 0 && l.FF == 0 })},
	"falcon-h1":     {adjust: recurrentWhere(func(Layer) bool { return true })},
	// Gated DeltaNet / gated attention hybrid with routed and shared
	// experts (src/models/qwen3next.cpp): the linear-attention layers
	// keep a Mamba-style state and no KV cache.
	"qwen3next": {adjust: qwen3next},
	// Qwen3.5 and 3.6 dense (src/models/qwen35.cpp): Qwen3-Next's layer
	// plan (gated DeltaNet on three layers of four, gated attention on the
	// fourth) with a dense FFN, and interleaved multi-section RoPE, whose
	// positions are four rows a token (llama_hparams::n_pos_per_embd).
	"qwen35": {adjust: qwen35},
	// Qwen3.5 and 3.6 MoE (src/models/qwen35moe.cpp): the same layers with
	// Qwen3-Next's routed experts and gated shared expert.
	"qwen35moe": {adjust: qwen35},
	// MoE with a NextN block (weights skipped, KV cache kept: see FromGGUF).
	"glm4moe": {},
	// Chunked attention on three layers of four; the chunked cache is
	// sized like a sliding one (llama-kv-cache-iswa.cpp size_swa).
	"llama4": {swaPattern: 4, fixedWindow: 8192},
	// Gemma 4 (src/models/gemma4.cpp): sliding and global layers by the
	// file's own per-layer pattern, each kind with its own head width and
	// KV head count; see gemma4 for what is not modeled yet.
	"gemma4": {swaFromKey: true, adjust: gemma4,
		firstLayerTensors: []string{"per_layer_model_proj.weight", "per_layer_proj_norm.weight"}},
	// Gemma 3n (src/models/gemma3n.cpp): four sliding layers to one global,
	// KV only in the first 20 layers whatever attention.shared_kv_layers
	// says, the AltUp projections on the output layer and the per-layer
	// input projection on layer 0 (LLM_TENSOR_INFOS in llama-arch.cpp).
	"gemma3n": {swaPattern: 5, swaPeriodKey: true, kvFromStart: gemma3nKVLayers, adjust: gemma3n,
		outputTensors:     []string{"altup_proj.weight", "altup_unembd_proj.weight"},
		firstLayerTensors: []string{"per_layer_model_proj.weight", "per_layer_proj_norm.weight"}},
	// MiniMax-M2 (src/models/minimax-m2.cpp): llama's cache over every
	// layer; sigmoid-routed experts with a selection bias.
	"minimax-m2": {},
	// BERT encoders (src/models/bert.cpp, nomic-bert.cpp): no memory,
	// the embedding norm on layer 0 (LLM_TENSOR_TOKEN_EMBD_NORM is a
	// repeating layer's), a reranker's head on the output layer.
	"bert":       {encoder: true, firstLayerTensors: encoderFirstLayer},
	"nomic-bert": {encoder: true, firstLayerTensors: encoderFirstLayer},
}

// Known lists the architectures headroom models, sorted.
func Known() []string {
	return slices.Sorted(maps.Keys(families))
}

// slidingLayers returns which layers use the sliding window, or nil when
// the model has no sliding-window layers.
func (f family) slidingLayers(h hparams, m *Model) ([]bool, error) {
	if m.Window == 0 {
		return nil, nil
	}
	if f.swaFromKey {
		if v, ok := h.m.Lookup(h.prefix + "attention.sliding_window_pattern"); ok {
			if arr, ok := v.AsArray(); ok {
				bs, ok := arr.Bools()
				if !ok || len(bs) != m.NLayer {
					return nil, &Incompatible{Reason: fmt.Sprintf("%sattention.sliding_window_pattern should hold %d bools", h.prefix, m.NLayer)}
				}
				return bs, nil
			}
		}
	}
	period := f.swaPattern
	if f.swaPeriodKey {
		if v, ok := h.m.Lookup(h.prefix + "attention.sliding_window_pattern"); ok {
			if _, isArr := v.AsArray(); !isArr {
				p, ok := v.AsUint()
				if !ok || p > math.MaxInt32 {
					return nil, &Incompatible{Reason: fmt.Sprintf("%sattention.sliding_window_pattern is %s %v, expected a period", h.prefix, v.Type(), v)}
				}
				if p == 0 {
					// set_swa_pattern(0): every layer slides.
					return slices.Repeat([]bool{true}, m.NLayer), nil
				}
				period = int(p)
			}
		}
	}
	if period == 0 {
		return nil, nil
	}
	out := make([]bool, m.NLayer)
	for i := range out {
		out[i] = i%period < period-1
	}
	return out, nil
}

// hparams reads architecture-prefixed keys ("llama.block_count").
type hparams struct {
	m      *gguf.Model
	prefix string
}

// need reads a required integer key.
func (h hparams) need(key string) (int, error) {
	n, ok, err := h.get(key)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, &Incompatible{Reason: fmt.Sprintf("missing %s%s", h.prefix, key)}
	}
	return n, nil
}

// opt reads an optional integer key, def when absent.
func (h hparams) opt(key string, def int) (int, error) {
	n, ok, err := h.get(key)
	if err != nil || !ok {
		return def, err
	}
	return n, nil
}

func (h hparams) get(key string) (int, bool, error) {
	v, ok := h.m.Lookup(h.prefix + key)
	if !ok {
		return 0, false, nil
	}
	u, ok := v.AsUint()
	if !ok || u > math.MaxInt32 {
		return 0, false, &Incompatible{Reason: fmt.Sprintf("%s%s is %s %v, expected a non-negative integer", h.prefix, key, v.Type(), v)}
	}
	return int(u), true, nil
}

// float reads a number key: its value and whether the file has it, or
// an error naming what the key holds instead.
func (h hparams) float(key string) (float64, bool, error) {
	v, ok := h.m.Lookup(h.prefix + key)
	if !ok {
		return 0, false, nil
	}
	f, ok := v.AsFloat()
	if !ok {
		return 0, true, &Incompatible{Reason: fmt.Sprintf("%s%s is %s %v, expected a number", h.prefix, key, v.Type(), v)}
	}
	return f, true, nil
}

// perLayer reads a key that is a scalar for all layers or an array with
// one value per layer (llama.cpp's get_key_or_arr). def fills layers when
// the key is absent.
func (h hparams) perLayer(key string, n, def int) ([]int, error) {
	out := make([]int, n)
	v, ok := h.m.Lookup(h.prefix + key)
	if !ok {
		for i := range out {
			out[i] = def
		}
		return out, nil
	}
	if arr, isArr := v.AsArray(); isArr {
		xs, ok := arr.Ints()
		if !ok || len(xs) != n {
			return nil, &Incompatible{Reason: fmt.Sprintf("%s%s is an array of %d %s, expected %d integers", h.prefix, key, arr.Len(), arr.Elem(), n)}
		}
		for i, x := range xs {
			if x < 0 || x > math.MaxInt32 {
				return nil, &Incompatible{Reason: fmt.Sprintf("%s%s[%d] = %d is out of range", h.prefix, key, i, x)}
			}
			out[i] = int(x)
		}
		return out, nil
	}
	x, _, err := h.get(key)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i] = x
	}
	return out, nil
}

// ssmDims reads the Mamba-family state sizes (llama-hparams.cpp n_embd_r
// and n_embd_s): the conv state keeps d_conv-1 columns of the conv input
// (d_inner plus the B and C projections of every group), the scan state
// d_state x d_inner.
func ssmDims(h hparams) (r, s int, err error) {
	conv, err := h.need("ssm.conv_kernel")
	if err != nil {
		return 0, 0, err
	}
	inner, err := h.need("ssm.inner_size")
	if err != nil {
		return 0, 0, err
	}
	state, err := h.need("ssm.state_size")
	if err != nil {
		return 0, 0, err
	}
	groups, _ := h.opt("ssm.group_count", 0)
	if conv < 1 {
		return 0, 0, &Incompatible{Reason: fmt.Sprintf("%sssm.conv_kernel is %d", h.prefix, conv)}
	}
	return (conv - 1) * (inner + 2*groups*state), state * inner, nil
}

// recurrentAll marks every layer as a pure recurrent (Mamba) layer.
func recurrentAll(h hparams, m *Model) error {
	r, s, err := ssmDims(h)
	if err != nil {
		return err
	}
	for i := range m.Layers {
		m.Layers[i] = Layer{Index: i, Recurrent: true, RDim: r, SDim: s, FF: m.Layers[i].FF}
	}
	return nil
}

// lfm2 layers without KV heads are short-convolution layers whose state is
// the last l_cache-1 inputs of n_embd each, and no scan state.
func lfm2(h hparams, m *Model) error {
	lcache, err := h.need("shortconv.l_cache")
	if err != nil {
		return err
	}
	for i := range m.Layers {
		if m.Layers[i].HeadsKV == 0 {
			m.Layers[i].Recurrent = true
			m.Layers[i].RDim = m.NEmbd * (lcache - 1)
		}
	}
	return nil
}

// recurrentWhere gives the layers that rec selects a Mamba-2 state
// (ssmDims), leaving their attention as the metadata set it. Granite 4.0-H
// layers are recurrent iff they have no KV heads (granite-hybrid.cpp);
// Nemotron-H's iff they have neither KV heads nor an FFN, its MLP-only
// layers keeping no cache at all (nemotron-h.cpp); every Falcon-H1 layer
// runs a Mamba-2 mixer beside its attention and keeps both a KV cache and a
// recurrent state (create_memory's filters both return true for it).
func recurrentWhere(rec func(Layer) bool) func(hparams, *Model) error {
	return func(h hparams, m *Model) error {
		r, s, err := ssmDims(h)
		if err != nil {
			return err
		}
		for i := range m.Layers {
			if rec(m.Layers[i]) {
				m.Layers[i].Recurrent = true
				m.Layers[i].RDim, m.Layers[i].SDim = r, s
			}
		}
		return nil
	}
}

// qwen3next marks its gated-DeltaNet layers recurrent, as its
// load_arch_hparams does: attention.recurrent_layers when the file has it,
// else every layer but each full_attention_interval-th (default 4). A
// recurrent layer keeps a conv state of d_conv-1 columns of Q, K and V
// (ssmDims: d_inner is the value width, the groups the key heads) and a
// d_state x d_inner delta-rule state, and no KV cache although the
// metadata gives every layer KV heads (the hybrid memory's filters).
func qwen3next(h hparams, m *Model) error {
	r, s, err := ssmDims(h)
	if err != nil {
		return err
	}
	// The NextN (MTP) blocks after the trunk keep no cache in the main
	// context: create_memory's hybrid filters take il < n_layer() only,
	// and load_hparams marks none of them recurrent.
	nextn, err := h.opt("nextn_predict_layers", 0)
	if err != nil {
		return err
	}
	if nextn > m.NLayer {
		return &Incompatible{Reason: fmt.Sprintf("%snextn_predict_layers %d is more than block_count %d", h.prefix, nextn, m.NLayer)}
	}
	trunk := m.NLayer - nextn
	recurrent := make([]bool, m.NLayer)
	if v, ok := h.m.Lookup(h.prefix + "attention.recurrent_layers"); ok {
		var bs []bool
		arr, isArr := v.AsArray()
		if isArr {
			bs, isArr = arr.Bools()
		}
		if !isArr || len(bs) != m.NLayer {
			return &Incompatible{Reason: fmt.Sprintf("%sattention.recurrent_layers should hold %d bools", h.prefix, m.NLayer)}
		}
		copy(recurrent, bs)
	} else {
		interval, err := h.opt("full_attention_interval", 4)
		if err != nil {
			return err
		}
		if interval < 1 {
			return &Incompatible{Reason: fmt.Sprintf("%sfull_attention_interval is %d, expected at least 1", h.prefix, interval)}
		}
		for i := range recurrent {
			recurrent[i] = i < trunk && (i+1)%interval != 0
		}
	}
	for i, rec := range recurrent {
		l := &m.Layers[i]
		switch {
		case i >= trunk:
			if m.Arch == "qwen35" || m.Arch == "qwen35moe" {
				// The MTP context's plain KV cache holds these layers
				// only (create_memory's filter il >= n_layer()).
				head := *l
				head.Attention = Full
				m.MTPHead = append(m.MTPHead, head)
			}
			l.Attention, l.HeadsKV, l.KDim, l.VDim = NoAttention, 0, 0, 0
			l.Recurrent = false
		case rec:
			l.Attention, l.HeadsKV, l.KDim, l.VDim = NoAttention, 0, 0, 0
			l.Recurrent, l.RDim, l.SDim = true, r, s
		}
	}
	return nil
}

// qwen35 is qwen3next's layer plan with multi-section RoPE, which
// llama.cpp's loader requires (rope.dimension_sections).
func qwen35(h hparams, m *Model) error {
	if _, ok := h.m.Lookup(h.prefix + "rope.dimension_sections"); !ok {
		return &Incompatible{Reason: "missing " + h.prefix + "rope.dimension_sections (llama.cpp requires it)"}
	}
	m.PosPerEmbd = 4
	return qwen3next(h, m)
}

// gemma4 reads what gemma4.cpp requires (the per-layer sliding pattern,
// the window) and the final logit soft-cap, and leaves what its graph
// does not replay yet to llama.cpp's projection: the per-layer embeddings
// and KV sharing of E2B and E4B. 26B-A4B's experts are read as any MoE's.
func gemma4(h hparams, m *Model) error {
	if _, ok := h.m.Lookup(h.prefix + "attention.sliding_window_pattern"); !ok {
		return &Incompatible{Reason: "missing " + h.prefix + "attention.sliding_window_pattern (llama.cpp requires it)"}
	}
	if m.Window <= 0 {
		return &Incompatible{Reason: "missing or zero " + h.prefix + "attention.sliding_window (llama.cpp requires it)"}
	}
	// load_arch_tensors creates the tied output before the embedding, as
	// Gemma 3n's does (without mmap the weights are loaded twice).
	m.OutputFirst = true
	for _, t := range h.m.Tensors {
		if t.Name == "per_layer_token_embd.weight" && t.Size > lazyReadMin {
			return &Incompatible{Unmodeled: true, Reason: fmt.Sprintf("Gemma 4's per-layer embedding table is %d MiB, over the 4 GiB from which llama.cpp reads it lazily, by rows, in a buffer of its own (TENSOR_READ_LAZY), which headroom does not model yet (a quantized file's table is smaller)", t.Size>>20)}
		}
	}
	shared, err := h.opt("attention.shared_kv_layers", 0)
	if err != nil {
		return err
	}
	if shared >= m.NLayer || (shared > 0 && m.NLayer-shared < 2) {
		return &Incompatible{Reason: fmt.Sprintf("%sattention.shared_kv_layers %d leaves %d of %d layers a cache of their own; llama.cpp needs at least two", h.prefix, shared, m.NLayer-shared, m.NLayer)}
	}
	if err := shareKVFrom(m, m.NLayer-shared); err != nil {
		return err
	}
	f, _, err := h.float("final_logit_softcapping")
	m.FinalSoftcap = f != 0
	return err
}

// lazyReadMin is the size above which llama.cpp's default lazy mode
// (auto) reads a TENSOR_READ_LAZY weight by rows instead of loading it
// (llama_model_loader::lazy_read::add).
const lazyReadMin = 4 << 30

// shareKVFrom gives the layers from n on (E2B's and E4B's
// n_layer_kv_from_start) no cache of their own: each reads the last
// cache of its kind among the first n (create_memory's reuse callback,
// n-1 for a global layer, n-2 for a sliding one), which must be of its
// kind, as llama.cpp asserts.
func shareKVFrom(m *Model, n int) error {
	for il := n; il < m.NLayer; il++ {
		l := &m.Layers[il]
		src := n - 1
		if l.Attention == Sliding {
			src = n - 2
		}
		if m.Layers[src].Attention != l.Attention {
			return &Incompatible{Reason: fmt.Sprintf("layer %d would share layer %d's KV cache, which is %s, not %s (llama.cpp aborts)", il, src, m.Layers[src].Attention, l.Attention)}
		}
	}
	for il := n; il < m.NLayer; il++ {
		l := &m.Layers[il]
		src := n - 1
		if l.Attention == Sliding {
			src = n - 2
		}
		l.KVShared, l.KVLayer, l.Attention = true, src, NoAttention
	}
	return nil
}

// gemma3nKVLayers is the n_layer_kv_from_start gemma3n.cpp hard-codes.
const gemma3nKVLayers = 20

// gemma3n checks what gemma3n.cpp requires beyond the common keys: the
// sliding window (read without a default), and KV sharing the engine can
// carry out. Layer il >= n_layer_kv_from_start reads layer
// n_layer_kv_from_start-1's cache when it is global and -2's when it
// slides (llama_model::create_memory's reuse callback), and the engine
// asserts that the layer it names holds a cache of that kind.
func gemma3n(h hparams, m *Model) error {
	m.OutputFirst = true
	w, err := h.need("attention.sliding_window")
	if err != nil {
		return err
	}
	if w == 0 {
		// The engine still builds its sliding cache, over a window of no
		// tokens; headroom's sliding layers need a window.
		return &Incompatible{Reason: h.prefix + "attention.sliding_window is 0, which headroom does not model"}
	}
	const n = gemma3nKVLayers
	for il := n; il < m.NLayer; il++ {
		src := n - 1
		if m.Layers[il].Attention == Sliding {
			src = n - 2
		}
		if m.Layers[src].Attention != m.Layers[il].Attention {
			return &Incompatible{Reason: fmt.Sprintf("layer %d would share layer %d's KV cache, which is %s, not %s (llama.cpp aborts)", il, src, m.Layers[src].Attention, m.Layers[il].Attention)}
		}
	}
	return nil
}

// granite refuses what llama.cpp refuses or what graniteGraph does not
// replay. llama.cpp requires logit_scale. Its other multipliers change no
// tensor or cache: attention.scale is the softmax's own factor, and
// embedding_scale and residual_scale add ggml_scale nodes that ggml-alloc
// places in their dying source's memory. A deepstack mapping (Granite
// Vision) adds inputs and nodes, and rope.scaling.finetuned false drops
// RoPE and its positions; neither is replayed yet.
func granite(h hparams, m *Model) error {
	if _, ok, err := h.float("logit_scale"); err != nil {
		return err
	} else if !ok {
		return &Incompatible{Reason: "missing " + h.prefix + "logit_scale (llama.cpp requires it)"}
	}
	if _, ok := h.m.Lookup(h.prefix + "deepstack_mapping"); ok {
		return &Incompatible{Reason: "Granite Vision's deepstack inputs (" + h.prefix + "deepstack_mapping) are not modeled"}
	}
	if v, ok := h.m.Lookup(h.prefix + "rope.scaling.finetuned"); ok {
		if on, _ := v.AsBool(); !on {
			return &Incompatible{Reason: "Granite without RoPE (" + h.prefix + "rope.scaling.finetuned false) is not modeled"}
		}
	}
	return nil
}

// mistral3 reads the optional attention temperature scale
// (src/models/mistral3.cpp's load_hparams).
func mistral3(h hparams, m *Model) error {
	f, _, err := h.float("attention.temperature_scale")
	m.AttnTempScale = f
	return err
}

// gptneox reads what gptneox.cpp's load_arch_hparams requires beyond the
// common keys, attention.layer_norm_epsilon and use_parallel_residual
// (llama.cpp refuses a file without either), and refuses what its graph
// cannot run: a layer without attention heads, or K and V heads of
// different sizes (the graph asserts n_embd_head_k == n_embd_head_v).
func gptneox(h hparams, m *Model) error {
	if _, ok, err := h.float("attention.layer_norm_epsilon"); err != nil {
		return err
	} else if !ok {
		return &Incompatible{Reason: "missing " + h.prefix + "attention.layer_norm_epsilon (llama.cpp requires it)"}
	}
	v, ok := h.m.Lookup(h.prefix + "use_parallel_residual")
	if !ok {
		return &Incompatible{Reason: "missing " + h.prefix + "use_parallel_residual (llama.cpp requires it)"}
	}
	par, ok := v.AsBool()
	if !ok {
		return &Incompatible{Reason: fmt.Sprintf("%suse_parallel_residual is %s %v, expected a bool", h.prefix, v.Type(), v)}
	}
	m.ParallelResidual = par
	for _, l := range m.Layers {
		if l.Attention != Full {
			return &Incompatible{Reason: fmt.Sprintf("gptneox layer %d has no attention heads, which its graph cannot run", l.Index)}
		}
		if l.KDim != l.VDim {
			return &Incompatible{Reason: fmt.Sprintf("gptneox layer %d has K rows of %d and V rows of %d (llama.cpp asserts equal head sizes)", l.Index, l.KDim, l.VDim)}
		}
	}
	return nil
}
