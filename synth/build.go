package synth

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/headroom-llm/headroom/gguf"
)

// Build assembles the GGUF header of shape s under recipe q, with every
// tensor left as a hole.
func Build(s Shape, q Quant) (*gguf.Builder, error) {
	return BuildWith(s, q, QuantRules{})
}

// BuildWith is Build as an older llama-quantize with rules r would have
// typed the tensors.
func BuildWith(s Shape, q Quant, r QuantRules) (*gguf.Builder, error) {
	if _, ok := fileType[q]; !ok {
		return nil, fmt.Errorf("synth: unknown quantization %q", q)
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	b := gguf.NewBuilder()
	metadata(b, s, q)
	if err := tokenizer(b, s); err != nil {
		return nil, err
	}
	list, types := typedTensors(s, q, r)
	for i, typ := range types {
		if err := b.AddTensor(list[i].name, typ, list[i].shape, nil); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// typedTensors lists the shape's tensors in file order with the type
// recipe q gives each.
func typedTensors(s Shape, q Quant, r QuantRules) ([]pending, []gguf.GGMLType) {
	t := &tensors{}
	blocks, ok := archBlocks[s.Arch]
	if !ok {
		blocks = denseBlocks
	}
	blocks(t, s)
	return t.list, q.types(s, t.list, r)
}

func (s Shape) validate() error {
	if s.Layers <= 0 || s.Embd <= 0 || s.Vocab <= 0 {
		return fmt.Errorf("synth: shape %q has a zero dimension", s.Name)
	}
	if s.SSM != nil {
		if s.SSM.Inner <= 0 || s.SSM.State <= 0 || s.SSM.Heads <= 0 || s.SSM.Groups <= 0 || s.SSM.ConvKernel <= 1 {
			return fmt.Errorf("synth: shape %q has a zero SSM dimension", s.Name)
		}
		if s.SSM.Layers != "" && len(s.SSM.Layers) != s.Layers {
			return fmt.Errorf("synth: shape %q has %d layer kinds for %d layers", s.Name, len(s.SSM.Layers), s.Layers)
		}
		if s.Heads == 0 {
			return nil
		}
	}
	// Only an MoE whose every layer is experts (qwen35moe) has no dense FFN.
	if s.Heads <= 0 || s.HeadsKV <= 0 || s.FF <= 0 && (s.MoE == nil || s.Arch != "qwen35moe") {
		return fmt.Errorf("synth: shape %q has a zero dimension", s.Name)
	}
	if a := s.AltUp; a != nil && (a.Inputs < 2 || a.PerLayerEmbd <= 0 || a.LaurelRank <= 0 || a.Period < 0) {
		return fmt.Errorf("synth: shape %q has an invalid AltUp layout", s.Name)
	}
	if s.MoE != nil && (s.MoE.Experts <= 0 || s.MoE.Used <= 0 || s.MoE.Used > s.MoE.Experts || s.MoE.FF <= 0 ||
		s.MoE.NextN >= s.Layers || s.MoE.LeadingDense > s.Layers) {
		return fmt.Errorf("synth: shape %q has an invalid expert layout", s.Name)
	}
	if s.DSA != nil && (s.MLA == nil || s.MLA.QLoraRank <= 0 || s.DSA.Heads <= 0 || s.DSA.HeadDim <= 0 || s.DSA.TopK <= 0) {
		// The indexer's queries come from the q LoRA.
		return fmt.Errorf("synth: shape %q has an indexer without MLA's q LoRA", s.Name)
	}
	if s.Conv != nil && slices.ContainsFunc(s.Conv.AttnLayers, func(il int) bool { return il < 0 || il >= s.Layers }) {
		return fmt.Errorf("synth: shape %q names an attention layer beyond its %d layers", s.Name, s.Layers)
	}
	return nil
}

func (s Shape) headDim() int {
	if s.HeadDim != 0 {
		return s.HeadDim
	}
	if s.Heads == 0 {
		return 0
	}
	return s.Embd / s.Heads
}

// metadata writes the hyperparameters under the keys llama.cpp reads for
// s.Arch. The dense keys come first, in the order the original synth wrote
// them, so the headers of the first shapes did not change.
func metadata(b *gguf.Builder, s Shape, q Quant) {
	k := keys{b: b, arch: s.Arch}
	b.Set("general.architecture", gguf.StringValue(s.Arch))
	b.Set("general.name", gguf.StringValue(s.Name))
	b.Set("general.file_type", gguf.Uint32Value(fileType[q]))
	b.Set("general.quantization_version", gguf.Uint32Value(2))
	k.u32("context_length", s.CtxTrain)
	k.u32("embedding_length", s.Embd)
	k.u32("block_count", s.Layers+s.mtp())
	if s.mtp() > 0 {
		k.u32("nextn_predict_layers", s.mtp())
	}
	switch {
	case s.PLE != nil && s.PLE.DoubleWide:
		// Gemma4Model: the shared-KV layers' FFN twice as wide, one
		// width a layer.
		ff := make([]int32, s.Layers)
		for i := range ff {
			ff[i] = int32(s.layerFF(i))
		}
		k.set("feed_forward_length", gguf.Int32sValue(ff))
	case s.FF > 0 || s.Arch != "qwen35moe":
		// Qwen3.5 MoE's config has no intermediate_size, so its
		// converter writes no feed_forward_length.
		k.u32("feed_forward_length", s.FF)
	}
	k.u32("attention.head_count", s.Heads)
	headsKVMetadata(k, s)
	k.optF32("rope.freq_base", s.RopeTheta)
	if s.LayerNorm {
		k.f32("attention.layer_norm_epsilon", s.NormEps)
	} else {
		k.f32("attention.layer_norm_rms_epsilon", s.NormEps)
	}
	if s.Arch == "nemotron_h" {
		// Required by llama.cpp's loader as well (the MTP head's final
		// layer norm), although the trunk uses RMS norms.
		k.f32("attention.layer_norm_epsilon", s.NormEps)
	}
	headDimMetadata(k, s)
	mixerMetadata(k, s)
	if len(s.RopeSections) > 0 {
		k.set("rope.dimension_sections", gguf.Int32sValue(s.RopeSections))
	}
	if r := s.Rope; r != nil {
		k.set("rope.scaling.type", gguf.StringValue(r.Type))
		k.f32("rope.scaling.factor", r.Factor)
		if r.OrigCtx != 0 {
			k.u32("rope.scaling.original_context_length", r.OrigCtx)
		}
		k.optF32("rope.scaling.yarn_log_multiplier", r.YarnLogMul)
		k.optF32("rope.scaling.yarn_beta_fast", r.YarnBetaFst)
		k.optF32("rope.scaling.yarn_beta_slow", r.YarnBetaSlw)
	}
	k.optF32("attention.temperature_scale", s.AttnTemperature)
	k.optF32("logit_scale", s.LogitScale)
	k.optF32("embedding_scale", s.EmbeddingScale)
	k.optF32("residual_scale", s.ResidualScale)
	k.optF32("attention.scale", s.AttentionScale)
	k.optF32("attn_logit_softcapping", s.AttnSoftcap)
	k.optF32("final_logit_softcapping", s.FinalSoftcap)
	if s.AltUp != nil {
		altUpMetadata(b, s)
	}
	embedMetadata(k, s)
}

// keys writes an architecture's metadata keys.
type keys struct {
	b    *gguf.Builder
	arch string
}

func (k keys) u32(key string, v int)        { k.b.Set(k.arch+"."+key, gguf.Uint32Value(uint32(v))) }
func (k keys) f32(key string, v float32)    { k.b.Set(k.arch+"."+key, gguf.Float32Value(v)) }
func (k keys) set(key string, v gguf.Value) { k.b.Set(k.arch+"."+key, v) }

// optF32 writes a key only where the model has the feature (zero: it has
// not, and llama.cpp's default applies).
func (k keys) optF32(key string, v float32) {
	if v != 0 {
		k.f32(key, v)
	}
}

// headsKVMetadata writes the KV head count, per layer where layers differ.
func headsKVMetadata(k keys, s Shape) {
	switch {
	case s.Conv != nil:
		// LFM2 marks its convolution layers by a zero KV head count.
		perLayer := make([]int32, s.Layers)
		for _, il := range s.Conv.AttnLayers {
			perLayer[il] = int32(s.HeadsKV)
		}
		k.set("attention.head_count_kv", gguf.Int32sValue(perLayer))
	case s.MLA != nil:
		// One compressed KV row per token, shared by every head.
		k.u32("attention.head_count_kv", 1)
	case s.SSM != nil && s.SSM.Layers != "":
		// Hybrids mark their Mamba (and MLP) layers by a zero KV head
		// count; nemotron_h also by a zero FFN width on the non-MLP ones.
		kv := make([]int32, s.Layers)
		ff := make([]int32, s.Layers)
		for i, c := range s.SSM.Layers {
			if c == '*' {
				kv[i] = int32(s.HeadsKV)
			}
			if c == '-' {
				ff[i] = int32(s.FF)
			}
		}
		k.set("attention.head_count_kv", gguf.Int32sValue(kv))
		if s.Arch == "nemotron_h" {
			k.set("feed_forward_length", gguf.Int32sValue(ff))
		}
	case s.Global != nil:
		// Gemma 4: the sliding layers' KV heads and the global layers'.
		kv := make([]int32, s.Layers)
		for i := range kv {
			kv[i] = int32(s.Global.HeadsKV)
			if s.SWA.sliding(i) {
				kv[i] = int32(s.HeadsKV)
			}
		}
		k.set("attention.head_count_kv", gguf.Int32sValue(kv))
	case s.Arch == "gptneox" || s.encoder():
		// The converter writes no KV head count: as many as the heads.
	default:
		k.u32("attention.head_count_kv", s.HeadsKV)
	}
}

// headDimMetadata writes the key and value lengths and the rotated
// dimensions where a converter writes them; the RoPE sections and scaling
// come after the mixers' keys, where converters write them.
func headDimMetadata(k keys, s Shape) {
	headDim := s.headDim()
	switch {
	case s.Global != nil:
		// Gemma4Model: key/value_length are the global layers', the _swa
		// ones the sliding layers'; RoPE rotates whole global heads (the
		// proportional part through rope_freqs) and whole sliding ones.
		k.u32("attention.key_length", s.Global.HeadDim)
		k.u32("attention.value_length", s.Global.HeadDim)
		k.u32("attention.key_length_swa", headDim)
		k.u32("attention.value_length_swa", headDim)
		k.u32("rope.dimension_count", s.Global.HeadDim)
		k.u32("rope.dimension_count_swa", headDim)
		shared, ple := 0, 0
		if p := s.PLE; p != nil {
			shared, ple = p.SharedKV, p.Embd
		}
		k.u32("attention.shared_kv_layers", shared)
		k.u32("embedding_length_per_layer_input", ple)
	case s.MLA != nil:
		m := s.MLA
		k.u32("attention.key_length", m.KVLoraRank+m.RopeDim)
		k.u32("attention.value_length", m.KVLoraRank)
	case s.Heads != 0 && headDim != s.Embd/s.Heads:
		k.u32("attention.key_length", headDim)
		k.u32("attention.value_length", headDim)
	}
	// The granite converter is llama's, keys and all.
	switch s.Arch {
	case "llama", "mistral3", "deepseek2", "deepseek32", "granite", "smollm3":
		k.u32("vocab_size", s.Vocab)
	}
	switch s.Arch {
	case "llama", "mistral3", "phi3", "llama4", "granite", "smollm3":
		k.u32("rope.dimension_count", headDim)
	case "glm4moe":
		// partial_rotary_factor 0.5
		k.u32("rope.dimension_count", headDim/2)
	case "qwen3next", "qwen35", "qwen35moe":
		// partial_rotary_factor 0.25
		k.u32("rope.dimension_count", headDim/4)
	case "minimax-m2":
		// rotary_dim: half of each head is rotated
		k.u32("rope.dimension_count", s.RopeDim)
	case "gptneox":
		// rotary_pct of the head; the converter writes no rope.freq_base
		// (rotary_emb_base is llama.cpp's default 10000).
		k.u32("rope.dimension_count", s.RopeDim)
		k.set("use_parallel_residual", gguf.BoolValue(!s.SequentialResidual))
	}
}

// mixerMetadata writes the keys of the experts, the sliding window, MLA,
// the short convolution and the state-space layers.
func mixerMetadata(k keys, s Shape) {
	if m := s.MoE; m != nil {
		k.u32("expert_count", m.Experts)
		k.u32("expert_used_count", m.Used)
		k.u32("expert_feed_forward_length", m.FF)
		optU32 := func(key string, v int) {
			if v > 0 {
				k.u32(key, v)
			}
		}
		optU32("expert_shared_count", m.Shared)
		optU32("leading_dense_block_count", m.LeadingDense)
		k.optF32("expert_weights_scale", m.WeightsScale)
		optU32("nextn_predict_layers", m.NextN)
		optU32("interleave_moe_layer_step", m.Step)
		optU32("expert_shared_feed_forward_length", m.SharedFF)
		if m.GatingFunc != 0 {
			k.u32("expert_gating_func", m.GatingFunc)
		}
		if m.WeightsNorm {
			k.set("expert_weights_norm", gguf.BoolValue(true))
		}
		optU32("expert_group_count", m.Groups)
		optU32("expert_group_used_count", m.GroupsUsed)
	}
	if w := s.SWA; w != nil {
		k.u32("attention.sliding_window", w.Window)
		switch {
		case w.PerLayer:
			pattern := make([]bool, s.Layers)
			for i := range pattern {
				pattern[i] = w.sliding(i)
			}
			k.set("attention.sliding_window_pattern", gguf.BoolsValue(pattern))
		case w.Pattern != 0:
			k.u32("attention.sliding_window_pattern", w.Pattern)
		}
		k.optF32("rope.freq_base_swa", w.FreqBaseSWA)
	}
	if m := s.MLA; m != nil {
		if m.QLoraRank > 0 {
			k.u32("attention.q_lora_rank", m.QLoraRank)
		}
		k.u32("attention.kv_lora_rank", m.KVLoraRank)
		k.u32("attention.key_length_mla", m.NopeDim+m.RopeDim)
		k.u32("attention.value_length_mla", m.VDim)
		k.u32("rope.dimension_count", m.RopeDim)
	}
	if d := s.DSA; d != nil {
		k.u32("attention.indexer.head_count", d.Heads)
		k.u32("attention.indexer.key_length", d.HeadDim)
		k.u32("attention.indexer.top_k", d.TopK)
	}
	if c := s.Conv; c != nil {
		k.u32("shortconv.l_cache", c.LCache)
	}
	if m := s.SSM; m != nil {
		k.u32("ssm.conv_kernel", m.ConvKernel)
		k.u32("ssm.inner_size", m.Inner)
		k.u32("ssm.state_size", m.State)
		k.u32("ssm.time_step_rank", m.Heads)
		k.u32("ssm.group_count", m.Groups)
		if m.AttnInterval > 0 {
			k.u32("full_attention_interval", m.AttnInterval)
		}
	}
}

// tensors collects a model's tensors in file order. Their types are chosen
// once all are known, because llama.cpp's quantizer types one tensor by
// looking at the others (whether output.weight exists, how many
// attention-V tensors there are and where this one falls among them).
type tensors struct {
	list []pending
}

// add appends a matrix, which each recipe types as llama.cpp's quantizer
// would from an F16 file. dims are in ggml order (ne0 first).
func (t *tensors) add(name string, dims ...int) { t.push(name, false, dims) }

// f32 appends a tensor the converter writes in F32 and no recipe touches:
// norms, biases, routers, sinks, convolution kernels, SSM parameters.
func (t *tensors) f32(name string, dims ...int) { t.push(name, true, dims) }

func (t *tensors) push(name string, f32 bool, dims []int) {
	shape := make([]uint64, len(dims))
	for i, d := range dims {
		shape[i] = uint64(d)
	}
	t.list = append(t.list, pending{name: name, f32: f32, shape: shape})
}

func blk(i int) string { return "blk." + strconv.Itoa(i) + "." }

// tokenizer writes a vocabulary of the real size with made-up token text of
// realistic length, so the header is as long as the real one.
func tokenizer(b *gguf.Builder, s Shape) error {
	tokens := make([]string, s.Vocab)
	types := make([]int32, s.Vocab)
	switch s.Tokenizer {
	case "gpt2":
		for i := range tokens {
			tokens[i] = "Ġt" + strconv.FormatInt(int64(i), 36)
			types[i] = 1
		}
		// Control tokens live at the top of the vocabulary in both the
		// Llama 3 and Qwen families.
		const specials = 256
		for i := s.Vocab - specials; i < s.Vocab; i++ {
			tokens[i] = "<|special_" + strconv.Itoa(i) + "|>"
			types[i] = 3
		}
		for id, text := range s.Specials {
			tokens[id], types[id] = text, 3
		}
		merges := make([]string, 0, s.Vocab*2)
		for i := 0; len(merges) < cap(merges); i++ {
			merges = append(merges, "Ġt"+strconv.FormatInt(int64(i%s.Vocab), 36)+" "+strconv.FormatInt(int64(i), 36))
		}
		pre := s.TokenizerPre
		if pre == "" {
			pre = "llama-bpe"
			if s.Arch != "llama" {
				pre = "qwen2"
			}
		}
		b.Set("tokenizer.ggml.model", gguf.StringValue("gpt2"))
		b.Set("tokenizer.ggml.pre", gguf.StringValue(pre))
		b.Set("tokenizer.ggml.tokens", gguf.StringsValue(tokens))
		b.Set("tokenizer.ggml.token_type", gguf.Int32sValue(types))
		b.Set("tokenizer.ggml.merges", gguf.StringsValue(merges))
		b.Set("tokenizer.ggml.bos_token_id", gguf.Uint32Value(uint32(s.Vocab-specials)))
		b.Set("tokenizer.ggml.eos_token_id", gguf.Uint32Value(uint32(s.Vocab-specials+1)))
	case "llama":
		// SentencePiece: <unk>, <s>, </s>, then the 256 byte tokens that
		// llama.cpp requires, then ordinary pieces.
		if s.Vocab < 3+256 {
			return fmt.Errorf("synth: an SPM vocabulary needs at least 259 tokens, have %d", s.Vocab)
		}
		scores := make([]float32, s.Vocab)
		tokens[0], tokens[1], tokens[2] = "<unk>", "<s>", "</s>"
		types[0], types[1], types[2] = 2, 3, 3
		for i := range 256 {
			tokens[3+i] = fmt.Sprintf("<0x%02X>", i)
			types[3+i] = 6
		}
		for i := 259; i < s.Vocab; i++ {
			tokens[i] = "▁p" + strconv.FormatInt(int64(i), 36)
			types[i] = 1
			scores[i] = -float32(i)
		}
		for id, text := range s.Specials {
			tokens[id], types[id], scores[id] = text, 3, 0
		}
		b.Set("tokenizer.ggml.model", gguf.StringValue("llama"))
		b.Set("tokenizer.ggml.tokens", gguf.StringsValue(tokens))
		b.Set("tokenizer.ggml.scores", gguf.Float32sValue(scores))
		b.Set("tokenizer.ggml.token_type", gguf.Int32sValue(types))
		b.Set("tokenizer.ggml.bos_token_id", gguf.Uint32Value(1))
		b.Set("tokenizer.ggml.eos_token_id", gguf.Uint32Value(2))
		b.Set("tokenizer.ggml.unknown_token_id", gguf.Uint32Value(0))
	case "bert":
		return wordPiece(b, s)
	default:
		return fmt.Errorf("synth: unknown tokenizer %q (have gpt2, llama, bert)", s.Tokenizer)
	}
	return nil
}

// sharedKV reports whether layer il reads an earlier layer's cache
// (Gemma 4's num_kv_shared_layers).
func (s Shape) sharedKV(il int) bool { return s.PLE != nil && il >= s.Layers-s.PLE.SharedKV }

// layerFF is layer il's FFN width: twice FF on a shared-KV layer of a
// double-wide model.
func (s Shape) layerFF(il int) int {
	if s.sharedKV(il) && s.PLE.DoubleWide {
		return 2 * s.FF
	}
	return s.FF
}

// mtp is the number of multi-token-prediction blocks after the layers.
func (s Shape) mtp() int {
	if s.SSM == nil {
		return 0
	}
	return s.SSM.MTP
}
