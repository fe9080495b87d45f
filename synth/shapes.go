package synth

// shapes lists the built-in shapes by the name Lookup takes. Hyperparameters
// are from each model's published config.json (the text model's, for the
// multimodal ones); Source names it.
var shapes = map[string]Shape{
	// Dense llama-family transformers.
	"llama-3.1-8b": {Name: "Llama-3.1-8B", Arch: "llama", Layers: 32, Embd: 4096, Heads: 32, HeadsKV: 8, FF: 14336,
		Vocab: 128256, CtxTrain: 131072, RopeTheta: 500000, NormEps: 1e-5, Tokenizer: "gpt2",
		Source: "meta-llama/Llama-3.1-8B config.json"},
	"llama-3.1-70b": {Name: "Llama-3.1-70B", Arch: "llama", Layers: 80, Embd: 8192, Heads: 64, HeadsKV: 8, FF: 28672,
		Vocab: 128256, CtxTrain: 131072, RopeTheta: 500000, NormEps: 1e-5, Tokenizer: "gpt2",
		Source: "meta-llama/Llama-3.1-70B config.json"},
	"llama-3.2-1b": {Name: "Llama-3.2-1B", Arch: "llama", Layers: 16, Embd: 2048, Heads: 32, HeadsKV: 8, HeadDim: 64, FF: 8192,
		Vocab: 128256, CtxTrain: 131072, RopeTheta: 500000, NormEps: 1e-5, TiedOutput: true, Tokenizer: "gpt2",
		Source: "meta-llama/Llama-3.2-1B config.json"},
	"qwen2.5-0.5b": {Name: "Qwen2.5-0.5B", Arch: "qwen2", Layers: 24, Embd: 896, Heads: 14, HeadsKV: 2, FF: 4864,
		Vocab: 151936, CtxTrain: 32768, RopeTheta: 1000000, NormEps: 1e-6, QKVBias: true, TiedOutput: true, Tokenizer: "gpt2",
		Source: "Qwen/Qwen2.5-0.5B config.json"},
	"qwen2.5-7b": {Name: "Qwen2.5-7B", Arch: "qwen2", Layers: 28, Embd: 3584, Heads: 28, HeadsKV: 4, FF: 18944,
		Vocab: 152064, CtxTrain: 32768, RopeTheta: 1000000, NormEps: 1e-6, QKVBias: true, Tokenizer: "gpt2",
		Source: "Qwen/Qwen2.5-7B config.json"},
	"qwen3-0.6b": {Name: "Qwen3-0.6B", Arch: "qwen3", Layers: 28, Embd: 1024, Heads: 16, HeadsKV: 8, HeadDim: 128, FF: 3072,
		Vocab: 151936, CtxTrain: 40960, RopeTheta: 1000000, NormEps: 1e-6, QKNorm: true, TiedOutput: true, Tokenizer: "gpt2",
		Source: "Qwen/Qwen3-0.6B config.json"},
	"qwen3-8b": {Name: "Qwen3-8B", Arch: "qwen3", Layers: 36, Embd: 4096, Heads: 32, HeadsKV: 8, HeadDim: 128, FF: 12288,
		Vocab: 151936, CtxTrain: 40960, RopeTheta: 1000000, NormEps: 1e-6, QKNorm: true, Tokenizer: "gpt2",
		Source: "Qwen/Qwen3-8B config.json"},
	"tinyllama-1.1b": {Name: "TinyLlama-1.1B", Arch: "llama", Layers: 22, Embd: 2048, Heads: 32, HeadsKV: 4, FF: 5632,
		Vocab: 32000, CtxTrain: 2048, RopeTheta: 10000, NormEps: 1e-5, Tokenizer: "llama",
		Source: "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T config.json"},
	// head_dim 128 is not hidden/heads (96): the GGUF carries key_length.
	"ministral-3-3b": {Name: "Ministral-3-3B", Arch: "mistral3", Layers: 26, Embd: 3072, Heads: 32, HeadsKV: 8, HeadDim: 128, FF: 9216,
		Vocab: 131072, CtxTrain: 262144, RopeTheta: 1000000, NormEps: 1e-5, TiedOutput: true, Tokenizer: "gpt2", TokenizerPre: "tekken",
		Rope: &Rope{Type: "yarn", Factor: 16, OrigCtx: 16384, YarnBetaFst: 32, YarnBetaSlw: 1}, AttnTemperature: 0.1,
		Source: "mistralai/Ministral-3-3B-Instruct-2512 config.json (text_config)"},
	// Fused attn_qkv and gate+up; the config's sliding_window (2047) is in the
	// GGUF, and llama.cpp ignores it for phi3 (it logs that SWA is disabled).
	"phi-3-mini-4k": {Name: "Phi-3-mini-4k", Arch: "phi3", Layers: 32, Embd: 3072, Heads: 32, HeadsKV: 32, FF: 8192,
		Vocab: 32064, CtxTrain: 4096, RopeTheta: 10000, NormEps: 1e-5, Tokenizer: "llama", Fused: true,
		SWA: &SWA{Window: 2047},
		Specials: map[int]string{32000: "<|endoftext|>", 32001: "<|assistant|>", 32006: "<|system|>",
			32007: "<|end|>", 32010: "<|user|>"},
		Source: "microsoft/Phi-3-mini-4k-instruct config.json"},

	// Mixture of experts.
	"qwen3-30b-a3b": {Name: "Qwen3-30B-A3B", Arch: "qwen3moe", Layers: 48, Embd: 2048, Heads: 32, HeadsKV: 4, HeadDim: 128, FF: 6144,
		Vocab: 151936, CtxTrain: 40960, RopeTheta: 1000000, NormEps: 1e-6, QKNorm: true, Tokenizer: "gpt2",
		MoE:    &MoE{Experts: 128, Used: 8, FF: 768},
		Source: "Qwen/Qwen3-30B-A3B config.json"},
	// Alternating sliding (128) and full attention, attention sinks, biases
	// everywhere, MXFP4 experts.
	"gpt-oss-20b": {Name: "gpt-oss-20b", Arch: "gpt-oss", Layers: 24, Embd: 2880, Heads: 64, HeadsKV: 8, HeadDim: 64, FF: 2880,
		Vocab: 201088, CtxTrain: 131072, RopeTheta: 150000, NormEps: 1e-5, Tokenizer: "gpt2", TokenizerPre: "gpt-4o",
		MoE:    &MoE{Experts: 32, Used: 4, FF: 2880, Biases: true},
		SWA:    &SWA{Window: 128},
		Rope:   &Rope{Type: "yarn", Factor: 32, OrigCtx: 4096},
		Source: "openai/gpt-oss-20b config.json"},
	// MLA: the cache holds 512+64 per token and layer; the first layer is
	// dense, the others have 64 routed and 2 shared experts.
	"deepseek-v2-lite": {Name: "DeepSeek-V2-Lite", Arch: "deepseek2", Layers: 27, Embd: 2048, Heads: 16, HeadsKV: 16, FF: 10944,
		Vocab: 102400, CtxTrain: 163840, RopeTheta: 10000, NormEps: 1e-6, Tokenizer: "gpt2", TokenizerPre: "deepseek-llm",
		MoE:    &MoE{Experts: 64, Used: 6, FF: 1408, Shared: 2, LeadingDense: 1, GatingFunc: 1, WeightsScale: 1},
		MLA:    &MLA{KVLoraRank: 512, RopeDim: 64, NopeDim: 128, VDim: 128},
		Rope:   &Rope{Type: "yarn", Factor: 40, OrigCtx: 4096, YarnLogMul: 0.0707},
		Source: "deepseek-ai/DeepSeek-V2-Lite config.json"},

	// Sliding-window attention: five local layers to one global.
	"gemma-3-1b": {Name: "Gemma-3-1B", Arch: "gemma3", Layers: 26, Embd: 1152, Heads: 4, HeadsKV: 1, HeadDim: 256, FF: 6912,
		Vocab: 262144, CtxTrain: 32768, RopeTheta: 1000000, NormEps: 1e-6, TiedOutput: true, QKNorm: true, Tokenizer: "llama",
		SWA:    &SWA{Window: 512, FreqBaseSWA: 10000},
		Source: "google/gemma-3-1b-pt config.json"},
	// Gemma 3n E2B: Gemma 3 blocks with AltUp (four copies of the hidden
	// state), Laurel residuals, a per-layer embedding of 256 values per
	// layer and token, and the last 10 layers reading earlier layers' KV.
	// The vocabulary is the full 262400 of the multimodal model: the
	// converter pads both embeddings (262144 rows in the checkpoint) to it.
	"gemma-3n-e2b": {Name: "Gemma-3n-E2B", Arch: "gemma3n", Layers: 30, Embd: 2048, Heads: 8, HeadsKV: 2, HeadDim: 256, FF: 8192,
		Vocab: 262400, CtxTrain: 32768, RopeTheta: 1000000, NormEps: 1e-6, TiedOutput: true, QKNorm: true, Tokenizer: "llama",
		SWA: &SWA{Window: 512, FreqBaseSWA: 10000}, FinalSoftcap: 30,
		AltUp: &AltUp{Inputs: 4, ActiveIdx: 0, PerLayerEmbd: 256, LaurelRank: 64, SharedKV: 10, SparseLayers: 10, Period: 5},
		Source: "google/gemma-3n-E2B-it text_config, not read here: values as published (hidden_size 2048, intermediate_size 8192 on each of 30 layers, " +
			"8 heads, 2 KV heads, head_dim 256, sliding_window 512, layer_types four sliding to one full, num_kv_shared_layers 10, altup_num_inputs 4, " +
			"laurel_rank 64, hidden_size_per_layer_input 256, vocab_size 262400, vocab_size_per_layer_input 262144, activation_sparsity 0.95 on the first 10 layers), " +
			"checked against llama.cpp's converter (Gemma3NModel) and gemma3n.cpp's hard-coded shapes"},
	"gemma-3-4b": {Name: "Gemma-3-4B", Arch: "gemma3", Layers: 34, Embd: 2560, Heads: 8, HeadsKV: 4, HeadDim: 256, FF: 10240,
		Vocab: 262208, CtxTrain: 131072, RopeTheta: 1000000, NormEps: 1e-6, TiedOutput: true, QKNorm: true, Tokenizer: "llama",
		SWA:    &SWA{Window: 1024, FreqBaseSWA: 10000},
		Rope:   &Rope{Type: "linear", Factor: 8},
		Source: "google/gemma-3-4b-pt config.json (text_config)"},

	// Recurrent state.
	"lfm2-350m": {Name: "LFM2-350M", Arch: "lfm2", Layers: 16, Embd: 1024, Heads: 16, HeadsKV: 8, FF: 4608,
		Vocab: 65536, CtxTrain: 128000, RopeTheta: 1000000, NormEps: 1e-5, TiedOutput: true, QKNorm: true,
		Tokenizer: "gpt2", TokenizerPre: "lfm2",
		Conv:   &ShortConv{LCache: 3, AttnLayers: []int{2, 5, 8, 10, 12, 14}},
		Source: "LiquidAI/LFM2-350M config.json (block_ff_dim 6656 auto-adjusted to 4608)"},
	"lfm2-1.2b": {Name: "LFM2-1.2B", Arch: "lfm2", Layers: 16, Embd: 2048, Heads: 32, HeadsKV: 8, FF: 8192,
		Vocab: 65536, CtxTrain: 128000, RopeTheta: 1000000, NormEps: 1e-5, TiedOutput: true, QKNorm: true,
		Tokenizer: "gpt2", TokenizerPre: "lfm2",
		Conv:   &ShortConv{LCache: 3, AttnLayers: []int{2, 5, 8, 10, 12, 14}},
		Source: "LiquidAI/LFM2-1.2B config.json (block_ff_dim 12288 auto-adjusted to 8192)"},
	"mamba2-130m": {Name: "Mamba2-130M", Arch: "mamba2", Layers: 24, Embd: 768, FF: 0,
		Vocab: 50288, CtxTrain: 1048576, NormEps: 1e-5, TiedOutput: true, Tokenizer: "gpt2", TokenizerPre: "gpt-2",
		SSM:    &SSM{ConvKernel: 4, Inner: 1536, State: 128, Groups: 1, Heads: 24},
		Source: "state-spaces/mamba2-130m config.json (vocab 50277 padded to a multiple of 16)"},

	// Gemma 2: alternating sliding (4096) and global layers, logit
	// soft-capping, no q/k norms.
	"gemma-2-2b": {Name: "Gemma-2-2B", Arch: "gemma2", Layers: 26, Embd: 2304, Heads: 8, HeadsKV: 4, HeadDim: 256, FF: 9216,
		Vocab: 256000, CtxTrain: 8192, RopeTheta: 10000, NormEps: 1e-6, TiedOutput: true, Tokenizer: "llama",
		SWA: &SWA{Window: 4096}, AttnSoftcap: 50, FinalSoftcap: 30,
		Source: "google/gemma-2-2b config.json"},
	// OLMo 2: post-norms only, q/k norms over the whole projection.
	"olmo-2-1b": {Name: "OLMo-2-1B", Arch: "olmo2", Layers: 16, Embd: 2048, Heads: 16, HeadsKV: 16, FF: 8192,
		Vocab: 100352, CtxTrain: 4096, RopeTheta: 500000, NormEps: 1e-6, Tokenizer: "gpt2", TokenizerPre: "dbrx",
		Source: "allenai/OLMo-2-0425-1B config.json"},
	// Command R7B: three sliding (4096) layers to one global, layer norm,
	// parallel attention and FFN, tied output.
	"command-r7b": {Name: "Command-R7B", Arch: "cohere2", Layers: 32, Embd: 4096, Heads: 32, HeadsKV: 8, FF: 14336,
		Vocab: 256000, CtxTrain: 131072, RopeTheta: 50000, NormEps: 1e-5, TiedOutput: true, Tokenizer: "gpt2", TokenizerPre: "command-r",
		SWA: &SWA{Window: 4096}, LayerNorm: true, LogitScale: 0.25,
		Source: "CohereForAI/c4ai-command-r7b-12-2024 config.json (sliding_window 4096, sliding_window_pattern 4)"},
	// Qwen1.5-MoE: 60 routed experts and a gated shared expert.
	"qwen1.5-moe-a2.7b": {Name: "Qwen1.5-MoE-A2.7B", Arch: "qwen2moe", Layers: 24, Embd: 2048, Heads: 16, HeadsKV: 16, FF: 5632,
		Vocab: 151936, CtxTrain: 8192, RopeTheta: 1000000, NormEps: 1e-6, QKVBias: true, Tokenizer: "gpt2",
		MoE:    &MoE{Experts: 60, Used: 4, FF: 1408, SharedFF: 5632},
		Source: "Qwen/Qwen1.5-MoE-A2.7B config.json"},

	// Granite 3: the llama layout with four multipliers (embedding,
	// residual, attention, logits) and tied embeddings. The config is
	// ibm-granite/granite-3.3-2b-instruct's (GraniteForCausalLM: vocab 49159,
	// rope_theta 1e7, embedding_multiplier 12, residual_multiplier 0.22,
	// attention_multiplier 0.015625, logits_scaling 8, no biases); its
	// tokenizer is StarCoder's, which llama.cpp's converter names "refact".
	"granite-3.3-2b": {Name: "Granite-3.3-2B", Arch: "granite", Layers: 40, Embd: 2048, Heads: 32, HeadsKV: 8, FF: 8192,
		Vocab: 49159, CtxTrain: 131072, RopeTheta: 10000000, NormEps: 1e-5, TiedOutput: true, Tokenizer: "gpt2", TokenizerPre: "refact",
		EmbeddingScale: 12, ResidualScale: 0.22, AttentionScale: 0.015625, LogitScale: 8,
		Source: "ibm-granite/granite-3.3-2b-instruct config.json"},

	// GPT-NeoX: layer norms and every projection with biases, a fused
	// QKV, NEOX RoPE on the first quarter of each 128-wide head
	// (rotary_pct 0.25), the FFN beside the attention
	// (use_parallel_residual), GELU, an untied output (embed_out). The
	// vocabulary is the config's 50304 (the tokenizer's 50277 padded by
	// the converter); the tokenizer is GPT-NeoX-20B's, which llama.cpp's
	// converter names "olmo" (OLMo 1.7 uses it too).
	"pythia-1.4b": {Name: "Pythia-1.4B", Arch: "gptneox", Layers: 24, Embd: 2048, Heads: 16, HeadsKV: 16, FF: 8192,
		Vocab: 50304, CtxTrain: 2048, NormEps: 1e-5, LayerNorm: true, RopeDim: 32, Tokenizer: "gpt2", TokenizerPre: "olmo",
		Source: "EleutherAI/pythia-1.4b config.json"},

	// Hybrid Mamba-2 / attention.
	// Four attention layers among 40; every layer has a SwiGLU FFN
	// (shared_intermediate_size 8192), no MoE, tied output. The positions
	// of the attention layers are not taken from the config here (spread
	// evenly); the cache size depends only on their count.
	"granite-4.0-h-micro": {Name: "Granite-4.0-H-Micro", Arch: "granitehybrid", Layers: 40, Embd: 2048, Heads: 32, HeadsKV: 8, FF: 8192,
		Vocab: 100352, CtxTrain: 131072, NormEps: 1e-5, TiedOutput: true, Tokenizer: "gpt2", TokenizerPre: "dbrx",
		SSM: &SSM{ConvKernel: 4, Inner: 4096, State: 128, Groups: 1, Heads: 64,
			Layers: "MMMMMMMMM*MMMMMMMMM*MMMMMMMMM*MMMMMMMMM*"},
		Source: "ibm-granite/granite-4.0-h-micro config.json (mamba_n_heads 64 x mamba_d_head 64, d_state 128, 1 group; attention positions assumed)"},
	// 24 Mamba-2, 4 attention and 24 MLP-only layers
	// (hybrid_override_pattern), squared-ReLU MLPs without a gate.
	"nemotron-h-4b": {Name: "Nemotron-H-4B", Arch: "nemotron_h", Layers: 52, Embd: 3072, Heads: 32, HeadsKV: 8, HeadDim: 128, FF: 12288,
		Vocab: 131072, CtxTrain: 8192, RopeTheta: 10000, NormEps: 1e-5, Tokenizer: "gpt2",
		SSM: &SSM{ConvKernel: 4, Inner: 7168, State: 128, Groups: 8, Heads: 112,
			Layers: "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"},
		Source: "nvidia/Nemotron-H-4B-Base-8K config.json (112 Mamba heads x 64, 8 groups)"},
	// Every layer runs a Mamba-2 mixer and attention side by side.
	"falcon-h1-0.5b": {Name: "Falcon-H1-0.5B", Arch: "falcon-h1", Layers: 36, Embd: 1024, Heads: 8, HeadsKV: 2, HeadDim: 64, FF: 2048,
		Vocab: 32784, CtxTrain: 16384, RopeTheta: 100000000000, NormEps: 1e-5, Tokenizer: "gpt2",
		SSM:    &SSM{ConvKernel: 4, Inner: 1536, State: 128, Groups: 1, Heads: 24},
		Source: "tiiuae/Falcon-H1-0.5B-Base config.json (mamba_d_ssm 1536, 24 heads x 64, d_state 128, 1 group)"},

	// Qwen3-Next: gated DeltaNet on three layers of four, gated attention
	// (256-wide heads, a quarter of them rotary) on the fourth, 512 routed
	// experts (10 used) and a shared expert on every layer. The MTP block
	// is left out, as llama.cpp's converter did until it learned to
	// write it.
	"qwen3-next-80b-a3b": {Name: "Qwen3-Next-80B-A3B", Arch: "qwen3next", Layers: 48, Embd: 2048, Heads: 16, HeadsKV: 2, HeadDim: 256, FF: 5120,
		Vocab: 151936, CtxTrain: 262144, RopeTheta: 10000000, NormEps: 1e-6, QKNorm: true, Tokenizer: "gpt2",
		MoE:    &MoE{Experts: 512, Used: 10, FF: 512, SharedFF: 512},
		SSM:    &SSM{ConvKernel: 4, Inner: 4096, State: 128, Groups: 16, Heads: 32, AttnInterval: 4},
		Source: "Qwen/Qwen3-Next-80B-A3B-Instruct config.json (linear attention: 16 key heads and 32 value heads of 128, conv kernel 4; full_attention_interval 4; partial_rotary_factor 0.25)"},
	// Qwen3.5 and 3.6 dense: Qwen3-Next's layer plan (gated DeltaNet on
	// three layers of four, gated attention with 256-wide heads, a quarter
	// rotary, on the fourth) with a dense SwiGLU FFN and interleaved
	// multi-section RoPE. The MTP block current converters append is left
	// out, as files converted before llama.cpp learned to write it have
	// none.
	"qwen3.5-0.8b": {Name: "Qwen3.5-0.8B", Arch: "qwen35", Layers: 24, Embd: 1024, Heads: 8, HeadsKV: 2, HeadDim: 256, FF: 3584,
		Vocab: 248320, CtxTrain: 262144, RopeTheta: 10000000, NormEps: 1e-6, QKNorm: true, TiedOutput: true, Tokenizer: "gpt2",
		RopeSections: []int32{11, 11, 10, 0},
		SSM:          &SSM{ConvKernel: 4, Inner: 2048, State: 128, Groups: 16, Heads: 16, AttnInterval: 4},
		Source:       "Qwen/Qwen3.5-0.8B config.json text_config, not read here: values as published (hidden_size 1024, intermediate_size 3584, 24 layers, 8 heads, 2 KV heads, head_dim 256, linear attention 16 key and 16 value heads of 128, conv kernel 4, full_attention_interval 4, vocab_size 248320, tied embeddings, rope_theta 1e7, partial_rotary_factor 0.25, mrope_section [11, 11, 10])"},
	"qwen3.5-27b": {Name: "Qwen3.5-27B", Arch: "qwen35", Layers: 64, Embd: 5120, Heads: 24, HeadsKV: 4, HeadDim: 256, FF: 17408,
		Vocab: 248320, CtxTrain: 262144, RopeTheta: 10000000, NormEps: 1e-6, QKNorm: true, Tokenizer: "gpt2",
		RopeSections: []int32{11, 11, 10, 0},
		SSM:          &SSM{ConvKernel: 4, Inner: 6144, State: 128, Groups: 16, Heads: 48, AttnInterval: 4},
		Source:       "Qwen/Qwen3.5-27B config.json text_config, not read here: values as published (hidden_size 5120, intermediate_size 17408, 64 layers, 24 heads, 4 KV heads, head_dim 256, linear attention 16 key and 48 value heads of 128, conv kernel 4, full_attention_interval 4, vocab_size 248320, untied output, rope_theta 1e7, partial_rotary_factor 0.25, mrope_section [11, 11, 10]); Qwen3.6-27B publishes the same shape"},
	// Gemma 4 31B: five sliding layers (window 1024, 16 KV heads of 256)
	// to one global (4 KV heads of 512, K doubling as V), a GeGLU FFN,
	// a tied embedding, final logit soft-capping.
	"gemma-4-31b": {Name: "Gemma-4-31B", Arch: "gemma4", Layers: 60, Embd: 5376, Heads: 32, HeadsKV: 16, HeadDim: 256, FF: 21504,
		Vocab: 262144, CtxTrain: 262144, RopeTheta: 1000000, NormEps: 1e-6, QKNorm: true, TiedOutput: true, Tokenizer: "llama",
		SWA:          &SWA{Window: 1024, Pattern: 6, FreqBaseSWA: 10000, PerLayer: true},
		Global:       &GlobalAttn{HeadsKV: 4, HeadDim: 512, KEqV: true},
		FinalSoftcap: 30,
		Source:       "google/gemma-4-31B config.json text_config, not read here: values as published (hidden_size 5376, intermediate_size 21504, 60 layers, 32 heads, num_key_value_heads 16 of head_dim 256 on sliding layers, num_global_key_value_heads 4 of global_head_dim 512, attention_k_eq_v, sliding_window 1024, layer_types five sliding to one full, vocab_size 262144, tied embeddings, rope_theta 1e6 global and 1e4 sliding, final_logit_softcapping 30), checked against llama.cpp's converter (Gemma4Model)"},
	// Gemma 4 E2B and E4B: sliding and global layers (512-token window)
	// with per-layer embeddings of 256 a layer, the last layers reading
	// earlier layers' caches; E2B's shared layers have an FFN twice as
	// wide.
	"gemma-4-e2b": {Name: "Gemma-4-E2B", Arch: "gemma4", Layers: 35, Embd: 1536, Heads: 8, HeadsKV: 1, HeadDim: 256, FF: 6144,
		Vocab: 262144, CtxTrain: 131072, RopeTheta: 1000000, NormEps: 1e-6, QKNorm: true, TiedOutput: true, Tokenizer: "llama",
		SWA:          &SWA{Window: 512, Pattern: 5, FreqBaseSWA: 10000, PerLayer: true},
		Global:       &GlobalAttn{HeadsKV: 1, HeadDim: 512},
		PLE:          &PerLayerInputs{Embd: 256, SharedKV: 20, DoubleWide: true},
		FinalSoftcap: 30,
		Source:       "google/gemma-4-E2B config.json text_config, not read here: values as four independent transcriptions of it agree (hidden_size 1536, intermediate_size 6144, 35 layers, 8 heads, num_key_value_heads 1, head_dim 256, global_head_dim 512, no num_global_key_value_heads, attention_k_eq_v false, num_kv_shared_layers 20, hidden_size_per_layer_input 256, vocab_size_per_layer_input 262144, use_double_wide_mlp, sliding_window 512, layer_types four sliding to one full, vocab_size 262144, tied embeddings, max_position_embeddings 131072, final_logit_softcapping 30); shared layers have no k_proj or v_proj (transformers' Gemma4 attention)"},
	"gemma-4-e4b": {Name: "Gemma-4-E4B", Arch: "gemma4", Layers: 42, Embd: 2560, Heads: 8, HeadsKV: 2, HeadDim: 256, FF: 10240,
		Vocab: 262144, CtxTrain: 131072, RopeTheta: 1000000, NormEps: 1e-6, QKNorm: true, TiedOutput: true, Tokenizer: "llama",
		SWA:          &SWA{Window: 512, Pattern: 6, FreqBaseSWA: 10000, PerLayer: true},
		Global:       &GlobalAttn{HeadsKV: 2, HeadDim: 512},
		PLE:          &PerLayerInputs{Embd: 256, SharedKV: 18},
		FinalSoftcap: 30,
		Source:       "google/gemma-4-E4B config.json text_config, not read here: values as two independent transcriptions of it agree (hidden_size 2560, intermediate_size 10240, 42 layers, 8 heads, num_key_value_heads 2, head_dim 256, global_head_dim 512, attention_k_eq_v false, num_kv_shared_layers 18, hidden_size_per_layer_input 256, use_double_wide_mlp false, sliding_window 512, layer_types five sliding to one full, vocab_size 262144, tied embeddings, final_logit_softcapping 30)"},
	// Gemma 4 26B-A4B: Gemma 4's sliding and global layers with, on
	// every layer, a dense GELU MLP beside 128 routed experts (8 used)
	// whose gate and up are one tensor.
	"gemma-4-26b-a4b": {Name: "Gemma-4-26B-A4B", Arch: "gemma4", Layers: 30, Embd: 2816, Heads: 16, HeadsKV: 8, HeadDim: 256, FF: 2112,
		Vocab: 262144, CtxTrain: 262144, RopeTheta: 1000000, NormEps: 1e-6, QKNorm: true, TiedOutput: true, Tokenizer: "llama",
		SWA:          &SWA{Window: 1024, Pattern: 6, FreqBaseSWA: 10000, PerLayer: true},
		Global:       &GlobalAttn{HeadsKV: 2, HeadDim: 512, KEqV: true},
		MoE:          &MoE{Experts: 128, Used: 8, FF: 704},
		FinalSoftcap: 30,
		Source:       "google/gemma-4-26B-A4B config.json text_config, not read here: values as three independent transcriptions of it agree (hidden_size 2816, intermediate_size 2112, 30 layers, 16 heads, num_key_value_heads 8 of head_dim 256 on sliding layers, num_global_key_value_heads 2 of global_head_dim 512, attention_k_eq_v, sliding_window 1024, layer_types five sliding to one full, enable_moe_block, num_experts 128, top_k_experts 8, moe_intermediate_size 704, vocab_size 262144, tied embeddings, final_logit_softcapping 30; router.proj, router.scale, router.per_expert_scale, experts.gate_up_proj [128, 1408, 2816], experts.down_proj [128, 2816, 704]), checked against llama.cpp's converter (Gemma4Model: ffn_gate_inp.scale, ffn_down_exps.scale)"},
	// Qwen3.5 and 3.6 35B-A3B: the same layers with 256 routed experts (8
	// used) and a gated shared expert on every layer, no dense FFN.
	"qwen3.5-35b-a3b": {Name: "Qwen3.5-35B-A3B", Arch: "qwen35moe", Layers: 40, Embd: 2048, Heads: 16, HeadsKV: 2, HeadDim: 256,
		Vocab: 248320, CtxTrain: 262144, RopeTheta: 10000000, NormEps: 1e-6, QKNorm: true, Tokenizer: "gpt2",
		RopeSections: []int32{11, 11, 10, 0},
		MoE:          &MoE{Experts: 256, Used: 8, FF: 512, SharedFF: 512},
		SSM:          &SSM{ConvKernel: 4, Inner: 4096, State: 128, Groups: 16, Heads: 32, AttnInterval: 4},
		Source:       "Qwen/Qwen3.5-35B-A3B config.json text_config, not read here: values as published (hidden_size 2048, 40 layers, 16 heads, 2 KV heads, head_dim 256, linear attention 16 key and 32 value heads of 128, conv kernel 4, full_attention_interval 4, 256 experts, 8 per token, moe_intermediate_size 512, shared_expert_intermediate_size 512, vocab_size 248320, untied output, rope_theta 1e7, partial_rotary_factor 0.25, mrope_section [11, 11, 10]); Qwen3.6-35B-A3B publishes the same shape"},
	// GLM-4.5-Air: 46 layers plus one NextN (MTP) block, the first layer
	// dense, 128 routed experts (8 used, sigmoid) and one shared expert,
	// biased q/k/v, half-rotary heads.
	"glm-4.5-air": {Name: "GLM-4.5-Air", Arch: "glm4moe", Layers: 47, Embd: 4096, Heads: 96, HeadsKV: 8, HeadDim: 128, FF: 10944,
		Vocab: 151552, CtxTrain: 131072, RopeTheta: 1000000, NormEps: 1e-5, QKVBias: true, Tokenizer: "gpt2", TokenizerPre: "glm4",
		MoE:    &MoE{Experts: 128, Used: 8, FF: 1408, Shared: 1, LeadingDense: 1, NextN: 1, GatingFunc: 2, WeightsScale: 1},
		Source: "zai-org/GLM-4.5-Air config.json (num_hidden_layers 46 + num_nextn_predict_layers 1)"},
	// SmolLM3 3B: llama's layout, RoPE left out of every fourth layer
	// (no_rope_layer_interval 4, hard-coded by llama.cpp).
	"smollm3-3b": {Name: "SmolLM3-3B", Arch: "smollm3", Layers: 36, Embd: 2048, Heads: 16, HeadsKV: 4, HeadDim: 128, FF: 11008,
		Vocab: 128256, CtxTrain: 65536, RopeTheta: 5000000, NormEps: 1e-6, TiedOutput: true, Tokenizer: "gpt2", TokenizerPre: "llama-bpe",
		Source: "HuggingFaceTB/SmolLM3-3B config.json, not read here: values as two sources that read it report (36 layers, hidden_size 2048, 16 heads, 4 KV heads, intermediate_size 11008, vocab_size 128256, rope_theta 5e6, rope_scaling null, tied embeddings, no_rope_layer_interval 4, max_position_embeddings 65536 from a fine-tune's copy); they give the 3,075,098,624 parameters a pinned snapshot of the repository is checked against"},
	// GLM-4.7: GLM-4.5-Air's layers at full size, with per-head q/k norms
	// (use_qk_norm) and three leading dense layers; 92 layers plus the
	// NextN block.
	"glm-4.7": {Name: "GLM-4.7", Arch: "glm4moe", Layers: 93, Embd: 5120, Heads: 96, HeadsKV: 8, HeadDim: 128, FF: 12288,
		Vocab: 151552, CtxTrain: 202752, RopeTheta: 1000000, NormEps: 1e-5, QKVBias: true, QKNorm: true, Tokenizer: "gpt2", TokenizerPre: "glm4",
		MoE: &MoE{Experts: 160, Used: 8, FF: 1536, Shared: 1, LeadingDense: 3, NextN: 1, GatingFunc: 2, WeightsScale: 2.5,
			WeightsNorm: true, Groups: 1, GroupsUsed: 1},
		Source: "zai-org/GLM-4.7 config.json, read from the Hub's config page (refs/pr/49) and a second transcription that agrees: num_hidden_layers 92 + num_nextn_predict_layers 1, hidden_size 5120, 96 heads, 8 KV heads, head_dim 128, partial_rotary_factor 0.5, intermediate_size 12288, 160 routed experts (8 per token) of 1536, 1 shared, first_k_dense_replace 3, routed_scaling_factor 2.5, norm_topk_prob, n_group and topk_group 1, use_qk_norm, attention_bias, vocab_size 151552, max_position_embeddings 202752, rope_theta 1e6, untied"},
	// DeepSeek V3.1 (and V3, R1): MLA with a low-rank query, 256 routed
	// experts (sigmoid, with a selection bias) and one shared, three
	// leading dense layers. The MTP layer (num_nextn_predict_layers 1) is
	// not converted by llama.cpp for deepseek2, so 61 blocks.
	"deepseek-v3.1": {Name: "DeepSeek-V3.1", Arch: "deepseek2", Layers: 61, Embd: 7168, Heads: 128, HeadsKV: 128, FF: 18432,
		Vocab: 129280, CtxTrain: 163840, RopeTheta: 10000, NormEps: 1e-6, Tokenizer: "gpt2", TokenizerPre: "deepseek-v3",
		MoE: &MoE{Experts: 256, Used: 8, FF: 2048, Shared: 1, LeadingDense: 3, GatingFunc: 2, WeightsScale: 2.5,
			WeightsNorm: true, Groups: 8, GroupsUsed: 4},
		MLA:    &MLA{QLoraRank: 1536, KVLoraRank: 512, RopeDim: 64, NopeDim: 128, VDim: 128},
		Rope:   &Rope{Type: "yarn", Factor: 40, OrigCtx: 4096, YarnLogMul: 0.1},
		Source: "DeepSeek-V3-family config.json, not read here from deepseek-ai/DeepSeek-V3.1 itself: values as in several published copies of the V3/R1 config, which V3.1 shares (61 layers, hidden_size 7168, 128 heads, q_lora_rank 1536, kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128, intermediate_size 18432, 256 routed experts (8 per token) of 2048, 1 shared, first_k_dense_replace 3, sigmoid scoring in n_group 8 of which topk_group 4 are kept, norm_topk_prob, routed_scaling_factor 2.5, vocab_size 129280, max_position_embeddings 163840, yarn factor 40 over 4096 with mscale_all_dim 1, rope_theta 1e4, untied)"},
	// DeepSeek V3.2 (and V3.2-Exp): V3.1's layers with DeepSeek Sparse
	// Attention's lightning indexer in each (64 query heads of 128 from the
	// q LoRA, one key head of 128, the best 2048 tokens kept). The MTP
	// block (num_nextn_predict_layers 1) is left out, as converters before
	// llama.cpp's MTP export and with --no-mtp write it: 61 blocks.
	"deepseek-v3.2": {Name: "DeepSeek-V3.2", Arch: "deepseek32", Layers: 61, Embd: 7168, Heads: 128, HeadsKV: 128, FF: 18432,
		Vocab: 129280, CtxTrain: 163840, RopeTheta: 10000, NormEps: 1e-6, Tokenizer: "gpt2", TokenizerPre: "deepseek-v3",
		MoE: &MoE{Experts: 256, Used: 8, FF: 2048, Shared: 1, LeadingDense: 3, GatingFunc: 2, WeightsScale: 2.5,
			WeightsNorm: true, Groups: 8, GroupsUsed: 4},
		MLA:    &MLA{QLoraRank: 1536, KVLoraRank: 512, RopeDim: 64, NopeDim: 128, VDim: 128},
		DSA:    &DSA{Heads: 64, HeadDim: 128, TopK: 2048},
		Rope:   &Rope{Type: "yarn", Factor: 40, OrigCtx: 4096, YarnLogMul: 0.1},
		Source: "deepseek-ai/DeepSeek-V3.2-Exp config.json (DeepseekV32ForCausalLM), not read here: V3.1's values (see deepseek-v3.1) with index_n_heads 64, index_head_dim 128 and index_topk 2048, the keys llama.cpp's DeepseekV32Model converter writes as attention.indexer.*"},
	// Kimi K2: DeepSeek V3's layout with 384 experts, 64 heads and one
	// leading dense layer.
	"kimi-k2": {Name: "Kimi-K2-Instruct", Arch: "deepseek2", Layers: 61, Embd: 7168, Heads: 64, HeadsKV: 64, FF: 18432,
		Vocab: 163840, CtxTrain: 131072, RopeTheta: 50000, NormEps: 1e-6, Tokenizer: "gpt2", TokenizerPre: "kimi-k2",
		MoE: &MoE{Experts: 384, Used: 8, FF: 2048, Shared: 1, LeadingDense: 1, GatingFunc: 2, WeightsScale: 2.827,
			WeightsNorm: true, Groups: 1, GroupsUsed: 1},
		MLA:    &MLA{QLoraRank: 1536, KVLoraRank: 512, RopeDim: 64, NopeDim: 128, VDim: 128},
		Rope:   &Rope{Type: "yarn", Factor: 32, OrigCtx: 4096, YarnLogMul: 0.1},
		Source: "moonshotai/Kimi-K2-Instruct config.json, not read here: values from three transcriptions of it and NVIDIA Megatron-Bridge's KimiK2Provider, which agree (61 layers, hidden_size 7168, 64 heads, q_lora_rank 1536, kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128, intermediate_size 18432, 384 routed experts (8 per token) of 2048, 1 shared, first_k_dense_replace 1, routed_scaling_factor 2.827, n_group 1, vocab_size 163840, rope_theta 5e4, untied); max_position_embeddings 131072, yarn factor 32 over 4096 and rms_norm_eps 1e-6 and norm_topk_prob from a structural copy only"},
	// NVIDIA Nemotron Nano 9B v2: 27 Mamba-2, 4 attention and 25 MLP-only
	// layers, Mamba heads of 80.
	"nemotron-nano-9b-v2": {Name: "NVIDIA-Nemotron-Nano-9B-v2", Arch: "nemotron_h", Layers: 56, Embd: 4480, Heads: 40, HeadsKV: 8, HeadDim: 128, FF: 15680,
		Vocab: 131072, CtxTrain: 131072, RopeTheta: 10000, NormEps: 1e-5, Tokenizer: "gpt2",
		SSM: &SSM{ConvKernel: 4, Inner: 10240, State: 128, Groups: 8, Heads: 128,
			Layers: "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-"},
		Source: "nvidia/NVIDIA-Nemotron-Nano-9B-v2 config.json, not read here: values from NVIDIA Megatron-Bridge's NemotronNano9Bv2Provider (56 layers, hybrid_override_pattern as above, hidden_size 4480, 40 heads, 8 KV groups of 128, ffn 15680, 128 Mamba heads of 80, state 128, 8 groups, vocab 131072, 131072 positions); 27 Mamba, 25 MLP and 4 attention layers confirmed by NVIDIA's Jetson page; conv kernel 4, norm epsilon and an untied output as in Nemotron-H, not seen for this model"},
	// LFM2-2.6B: eight attention layers among 30, an FFN width used as
	// written (block_auto_adjust_ff_dim false).
	"lfm2-2.6b": {Name: "LFM2-2.6B", Arch: "lfm2", Layers: 30, Embd: 2048, Heads: 32, HeadsKV: 8, FF: 10752,
		Vocab: 65536, CtxTrain: 128000, RopeTheta: 1000000, NormEps: 1e-5, TiedOutput: true, QKNorm: true,
		Tokenizer: "gpt2", TokenizerPre: "lfm2",
		Conv:   &ShortConv{LCache: 3, AttnLayers: []int{2, 5, 9, 13, 17, 21, 24, 27}},
		Source: "LiquidAI/LFM2-2.6B's architecture as in LiquidAI/LFM2-2.6B-Transcript-ONNX config.json, not read here from LFM2-2.6B itself (30 layers, layer_types with full attention at 2, 5, 9, 13, 17, 21, 24, 27, hidden_size 2048, 32 heads, 8 KV heads, block_ff_dim 10752 with block_auto_adjust_ff_dim false, conv_L_cache 3, vocab_size 65536, 128000 positions); a tied embedding as in LFM2's smaller models, not seen for this one"},
	// Llama 4 Scout: 16 routed experts (1 used) and a shared expert on
	// every layer; llama.cpp hard-codes chunked attention (8192) on three
	// layers of four.
	"llama-4-scout": {Name: "Llama-4-Scout-17B-16E", Arch: "llama4", Layers: 48, Embd: 5120, Heads: 40, HeadsKV: 8, HeadDim: 128, FF: 16384,
		Vocab: 202048, CtxTrain: 10485760, RopeTheta: 500000, NormEps: 1e-5, Tokenizer: "gpt2", TokenizerPre: "llama4",
		MoE:    &MoE{Experts: 16, Used: 1, FF: 8192, Step: 1},
		Source: "meta-llama/Llama-4-Scout-17B-16E config.json (text_config)"},

	// MiniMax-M2: 62 layers of 256 sigmoid-routed experts (8 a token, a
	// selection bias, no shared expert), RMS norms over the whole Q and K
	// projections, RoPE on 64 of each head's 128 dimensions. The config's
	// MTP modules have no released weights, so the GGUFs have none.
	"minimax-m2": {Name: "MiniMax-M2", Arch: "minimax-m2", Layers: 62, Embd: 3072, Heads: 48, HeadsKV: 8, HeadDim: 128, FF: 1536,
		Vocab: 200064, CtxTrain: 196608, RopeTheta: 5000000, NormEps: 1e-6, RopeDim: 64, Tokenizer: "gpt2", TokenizerPre: "minimax-m2",
		MoE:    &MoE{Experts: 256, Used: 8, FF: 1536, GatingFunc: 2},
		Source: "MiniMaxAI/MiniMax-M2 config.json (as transformers' MiniMaxM2Config defaults and the M2.5 config have it: scoring_func sigmoid, use_routing_bias, rotary_dim 64, qk_norm_type per_layer)"},

	// Embedding and reranking models. BERT encoders keep no KV cache;
	// the converter writes no KV head count (as many as the heads) and a
	// layer norm epsilon.
	"bge-small-en-v1.5": {Name: "bge-small-en-v1.5", Arch: "bert", Layers: 12, Embd: 384, Heads: 12, HeadsKV: 12, FF: 1536,
		Vocab: 30522, CtxTrain: 512, NormEps: 1e-12, LayerNorm: true, Tokenizer: "bert", Pooling: "cls",
		ClsLabels: []string{"LABEL_0"},
		Source:    "BAAI/bge-small-en-v1.5 config.json (its one id2label entry is written as classifier.output_labels), CLS pooling"},
	"all-minilm-l6-v2": {Name: "all-MiniLM-L6-v2", Arch: "bert", Layers: 6, Embd: 384, Heads: 12, HeadsKV: 12, FF: 1536,
		Vocab: 30522, CtxTrain: 512, NormEps: 1e-12, LayerNorm: true, Tokenizer: "bert", Pooling: "mean",
		Source: "sentence-transformers/all-MiniLM-L6-v2 config.json, mean pooling (1_Pooling/config.json)"},
	// nomic-bert: RoPE instead of position embeddings, a fused QKV and a
	// SwiGLU FFN; the converter writes 2048 positions.
	"nomic-embed-text-v1.5": {Name: "nomic-embed-text-v1.5", Arch: "nomic-bert", Layers: 12, Embd: 768, Heads: 12, HeadsKV: 12, FF: 3072,
		Vocab: 30528, CtxTrain: 2048, RopeTheta: 1000, NormEps: 1e-12, LayerNorm: true, Tokenizer: "bert", Pooling: "mean",
		Source: "nomic-ai/nomic-embed-text-v1.5 config.json (n_positions 8192, max_trained_positions 2048: the converter writes 2048; vocabulary padded to a multiple of 64), mean pooling"},
	// Decoders converted for embeddings (last-token pooling) and for
	// reranking (a classifier of the lm_head's "yes" and "no" rows).
	"qwen3-embedding-0.6b": {Name: "Qwen3-Embedding-0.6B", Arch: "qwen3", Layers: 28, Embd: 1024, Heads: 16, HeadsKV: 8, HeadDim: 128, FF: 3072,
		Vocab: 151669, CtxTrain: 32768, RopeTheta: 1000000, NormEps: 1e-6, QKNorm: true, TiedOutput: true, Tokenizer: "gpt2",
		Pooling: "last",
		Source:  "Qwen/Qwen3-Embedding-0.6B config.json, last-token pooling"},
	"qwen3-reranker-0.6b": {Name: "Qwen3-Reranker-0.6B", Arch: "qwen3", Layers: 28, Embd: 1024, Heads: 16, HeadsKV: 8, HeadDim: 128, FF: 3072,
		Vocab: 151669, CtxTrain: 40960, RopeTheta: 1000000, NormEps: 1e-6, QKNorm: true, TiedOutput: true, Tokenizer: "gpt2",
		Pooling: "rank", ClsLabels: []string{"yes", "no"}, RerankPrompt: qwen3RerankPrompt,
		// the control tokens its rerank prompt is made of, where Qwen3's
		// vocabulary has them
		Specials: map[int]string{151643: "<|endoftext|>", 151644: "<|im_start|>", 151645: "<|im_end|>"},
		Source:   "Qwen/Qwen3-0.6B config.json, which Qwen3-Reranker-0.6B is tuned from, with Qwen3-Embedding-0.6B's 151669 tokens; llama.cpp's converter makes cls.output of the lm_head's yes and no rows"},
}
