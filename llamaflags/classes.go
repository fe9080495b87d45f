package llamaflags

// Use is what headroom does with a llama.cpp flag.
type Use string

const (
	// Modeled flags change what a load or a served request allocates,
	// and headroom counts them: fit, plan and serve each take them under
	// llama.cpp's spellings, with the same meaning.
	Modeled Use = "modeled"
	// Model flags name the model or a file of it (-m, -hf, -hff).
	Model Use = "model"
	// PassThrough flags change nothing headroom counts: threads, the HTTP
	// server, sampling, logging, templates. They reach llama-server
	// unchanged.
	PassThrough Use = "pass-through"
	// Refused flags change memory in a way headroom does not count yet,
	// or make llama-server do something other than serve one model; they
	// are an error that gives the reason, never silently dropped.
	Refused Use = "refused"
)

// Class is a flag's use and, for a refused or modeled one, why.
type Class struct {
	Use Use    `json:"use"`
	Why string `json:"why,omitempty"`
}

// Reasons shared by several refused flags.
const (
	whyRouter = "starts llama-server's router, which loads each model in a process of its own as requests ask for it: " +
		"fit one model at a time (-m FILE or -hf REPO:QUANT), or write the router's presets with headroom plan --router-preset"
	whyExits   = "prints and exits without loading a model: there is nothing to fit"
	whyPreset  = "a built-in preset that downloads a model of its own choosing and sets its own flags: name the model (-hf REPO:QUANT) and its flags instead"
	whyRemoved = "was removed in this build (llama-server refuses it): use --spec-draft-n-max, --spec-draft-n-min or the --spec-ngram-* flag of the type"
	whyAdapter = "adds weights (LoRA adapters, control vectors) that headroom does not account yet"
	whyDraft   = "places the draft model's weights in a way headroom does not account yet (it places the draft like the target)"
	whyImages  = "changes how many image tokens the projector encodes at once, and its compute buffer, which headroom estimates only for the defaults"
)

// classes classifies every flag of the held builds by its key (Flag.Key).
// TestEveryFlagClassified fails on a flag of a held build that is not
// here, and on an entry no held build has.
func classes() map[string]Class {
	m := map[string]Class{}
	set := func(c Class, keys ...string) {
		for _, k := range keys {
			m[k] = c
		}
	}
	set(Class{Use: Modeled, Why: "the context, slots and batches size the KV cache, the recurrent state and the compute buffers"},
		"--ctx-size", "--parallel", "--kv-unified", "--batch-size", "--ubatch-size", "--swa-full")
	set(Class{Use: Modeled, Why: "the cache types and flash attention size the KV cache and the compute buffers"},
		"--cache-type-k", "--cache-type-v", "--flash-attn")
	set(Class{Use: Modeled, Why: "placement: which weights, caches and compute buffers go on which device"},
		"--gpu-layers", "--tensor-split", "--kv-offload", "--cpu-moe", "--n-cpu-moe", "--override-tensor", "--rpc")
	set(Class{Use: Modeled, Why: "how the weights are loaded: mapped (reclaimable page cache) or read into buffers, locked or not"},
		"--mmap", "--mlock", "--load-mode")
	set(Class{Use: Modeled, Why: "what llama-server keeps past the load: the prompt cache and context checkpoints (docs/serving.md)"},
		"--cache-ram", "--ctx-checkpoints", "--checkpoint-min-step", "--cache-idle-slots")
	set(Class{Use: Modeled, Why: "a companion model whose weights and contexts are counted: the projector, the speculative draft"},
		"--mmproj", "--mmproj-offload", "--spec-draft-model", "--spec-draft-ngl")
	set(Class{Use: Modeled, Why: "llama.cpp's own fit rewrites -c and -ngl at load; headroom writes --fit off and takes only off"}, "--fit")
	set(Class{Use: Model}, "--model", "--hf-repo", "--hf-file", "--model-url")

	set(Class{Use: Refused, Why: "how layers are split over several GPUs: only the default (layer) is modeled"}, "--split-mode")
	set(Class{Use: Refused, Why: "which devices llama.cpp offloads to: headroom plans for the devices of the machine (--machine names another)"}, "--device")
	set(Class{Use: Refused, Why: "keeps dense FFN weights in system memory, a placement headroom does not account yet (--n-cpu-moe is, for experts)"}, "--n-cpu-ffn")
	set(Class{Use: Refused, Why: "changes the buffer types weights are loaded into (host buffers, repacking), which headroom counts for the defaults"}, "--no-host", "--repack")
	set(Class{Use: Refused, Why: "changes where host tensors' operations run, and so the compute buffers, counted for the default (on)"}, "--op-offload")
	set(Class{Use: Refused, Why: "reads tensors from disk on demand instead of keeping them resident, counted for the default (auto)"}, "--lazy-mode")
	set(Class{Use: Refused, Why: "loads with direct I/O into buffers; headroom counts mmap and --load-mode none"}, "--direct-io")
	set(Class{Use: Refused, Why: "llama.cpp's own fit's margin and least context, which act only with --fit on: headroom plan --fit-target and --min-ctx search with them"}, "--fit-target", "--fit-ctx")
	set(Class{Use: Refused, Why: "overrides the model's metadata, which can change any shape headroom reads from it"}, "--override-kv")
	set(Class{Use: Refused, Why: "limits each slot's share of a unified cache, which headroom does not model yet"}, "--kv-unified-per-slot")
	set(Class{Use: Refused, Why: "samples on the device, with buffers headroom does not count (experimental in llama.cpp)"}, "--backend-sampling")
	set(Class{Use: Modeled, Why: "an embedding or reranking server: every prompt token an output, n_batch lowered to n_ubatch, the pooling in the graph, the output buffer grown to a batch of outputs while serving (docs/embeddings.md)"},
		"--embedding", "--rerank", "--pooling")
	set(Class{Use: Modeled, Why: "speculative decoding: the draft context llama-server makes (on the -md model, or on the target's own MTP head with draft-mtp), its cache types, and the target's drafted output rows and recurrent snapshots; draft-eagle3, draft-dflash, draft-dspark and the n-gram types are refused with the reason (docs/speculative.md)"},
		"--spec-type", "--spec-draft-n-max", "--spec-draft-type-k", "--spec-draft-type-v")
	set(Class{Use: Refused, Why: "names a draft model on Hugging Face: give it to headroom with -md hf:REPO:QUANT, which resolves and counts it"}, "--spec-draft-hf")
	set(Class{Use: Refused, Why: "names a projector by URL: give it with --mmproj (a path, URL or hf: reference), which headroom counts"}, "--mmproj-url")
	set(Class{Use: Refused, Why: "with -hf llama-server downloads the repository's projector by itself; headroom counts a projector given with --mmproj"}, "--mmproj-auto")
	set(Class{Use: Refused, Why: "names a Docker Hub model, a source headroom does not read: give the GGUF (a path, URL or hf: reference)"}, "--docker-repo")
	set(Class{Use: Refused, Why: whyAdapter}, "--lora", "--lora-scaled", "--control-vector", "--control-vector-scaled", "--control-vector-layer-range", "--lora-init-without-apply")
	set(Class{Use: Refused, Why: whyDraft}, "--spec-draft-override-tensor", "--spec-draft-cpu-moe",
		"--spec-draft-n-cpu-moe", "--spec-draft-device", "--mmproj-device")
	set(Class{Use: Modeled, Why: "the projector's image token bounds: clip warms the replayed encoders (gemma3, pixtral, qwen2vl_merger, qwen2.5vl_merger) up at the same image with or without them (measured), so what loads is counted; for other projector types they are refused"},
		"--image-min-tokens", "--image-max-tokens")
	set(Class{Use: Refused, Why: whyImages}, "--mtmd-batch-max-tokens")
	set(Class{Use: Refused, Why: whyRouter}, "--models-dir", "--models-preset", "--models-max", "--models-autoload")
	set(Class{Use: Refused, Why: whyExits}, "--help", "--version", "--cache-list", "--completion-bash", "--list-devices")
	set(Class{Use: Refused, Why: whyPreset}, "--embd-gemma-default", "--fim-qwen-1.5b-default", "--fim-qwen-3b-default", "--fim-qwen-7b-default",
		"--fim-qwen-7b-spec", "--fim-qwen-14b-spec", "--fim-qwen-30b-default", "--gpt-oss-20b-default", "--gpt-oss-120b-default",
		"--vision-gemma-4b-default", "--vision-gemma-12b-default", "--spec-default")
	set(Class{Use: Refused, Why: whyRemoved}, "--draft", "--draft-min", "--spec-ngram-size-n", "--spec-ngram-size-m", "--spec-ngram-min-hits")

	set(Class{Use: PassThrough, Why: "threads and CPU placement"},
		"--threads", "--threads-batch", "--cpu-mask", "--cpu-range", "--cpu-strict", "--prio", "--poll", "--cpu-mask-batch",
		"--cpu-range-batch", "--cpu-strict-batch", "--prio-batch", "--poll-batch", "--numa",
		"--spec-draft-threads", "--spec-draft-threads-batch", "--spec-draft-cpu-mask", "--spec-draft-cpu-range", "--spec-draft-cpu-strict",
		"--spec-draft-prio", "--spec-draft-poll", "--spec-draft-cpu-mask-batch", "--spec-draft-cpu-strict-batch", "--spec-draft-prio-batch",
		"--spec-draft-poll-batch")
	set(Class{Use: PassThrough, Why: "generation and sampling settings"},
		"--predict", "--keep", "--samplers", "--seed", "--sampler-seq", "--ignore-eos", "--temp", "--top-k", "--top-p", "--min-p",
		"--top-nsigma", "--xtc-probability", "--xtc-threshold", "--typical", "--repeat-last-n", "--repeat-penalty", "--presence-penalty",
		"--frequency-penalty", "--dry-multiplier", "--dry-base", "--dry-allowed-length", "--dry-penalty-last-n", "--dry-sequence-breaker",
		"--adaptive-target", "--adaptive-decay", "--dynatemp-range", "--dynatemp-exp", "--mirostat", "--mirostat-lr", "--mirostat-ent",
		"--logit-bias", "--grammar", "--grammar-file", "--json-schema", "--json-schema-file", "--context-shift", "--reverse-prompt",
		"--special", "--spm-infill", "--escape", "--grp-attn-n", "--grp-attn-w", "--ignore-eos")
	set(Class{Use: PassThrough, Why: "RoPE and YaRN scaling change the positions' frequencies, not any buffer's size"},
		"--rope-scaling", "--rope-scale", "--rope-freq-base", "--rope-freq-scale", "--yarn-orig-ctx", "--yarn-ext-factor",
		"--yarn-attn-factor", "--yarn-beta-slow", "--yarn-beta-fast")
	set(Class{Use: PassThrough, Why: "speculative decoding's settings, which size nothing headroom counts"},
		"--spec-draft-n-min", "--spec-synth-len", "--spec-synth-rates", "--spec-draft-p-split", "--spec-draft-p-min",
		"--spec-draft-backend-sampling", "--spec-ngram-mod-n-min", "--spec-ngram-mod-n-max", "--spec-ngram-mod-n-match",
		"--spec-ngram-simple-size-n", "--spec-ngram-simple-size-m", "--spec-ngram-simple-min-hits", "--spec-ngram-map-k-size-n",
		"--spec-ngram-map-k-size-m", "--spec-ngram-map-k-min-hits", "--spec-ngram-map-k4v-size-n", "--spec-ngram-map-k4v-size-m",
		"--spec-ngram-map-k4v-min-hits", "--lookup-cache-static", "--lookup-cache-dynamic")
	set(Class{Use: PassThrough, Why: "logging and diagnostics"},
		"--perf", "--log-disable", "--log-file", "--log-colors", "--verbose", "--verbosity", "--log-prefix", "--log-timestamps",
		"--log-prompts-dir", "--check-tensors", "--defrag-thold", "--warmup", "--offline", "--hf-token", "--verbose-prompt",
		"--show-timings", "--fit-print", "--print-token-count", "--log-jsonl")
	set(Class{Use: PassThrough, Why: "the HTTP server: address, keys, endpoints, CORS, timeouts, the web UI and its tools"},
		"--host", "--port", "--reuse-port", "--path", "--cors-origins", "--cors-methods", "--cors-headers", "--cors-credentials",
		"--api-prefix", "--ui-config", "--ui-config-file", "--ui-mcp-proxy", "--tools", "--tools-runtime", "--mcp-servers-config",
		"--mcp-servers-json", "--agent", "--ui", "--api-key", "--api-key-file", "--ssl-key-file", "--ssl-cert-file", "--timeout",
		"--sse-ping-interval", "--threads-http", "--metrics", "--props", "--slots", "--slot-save-path", "--media-path", "--alias",
		"--tags", "--cont-batching", "--slot-prompt-similarity", "--sleep-idle-seconds", "--cache-prompt", "--cache-reuse",
		"--embd-normalize", "--video-fps", "--video-timestamp-interval", "--video-ffmpeg-dir")
	set(Class{Use: PassThrough, Why: "picks the one GPU of --split-mode none (llama.cpp's llama_model_load keeps only it); with the layer split, the default and the one headroom takes, it changes nothing"}, "--main-gpu")
	set(Class{Use: PassThrough, Why: "chat templates and reasoning"},
		"--jinja", "--chat-template", "--chat-template-file", "--chat-template-kwargs", "--reasoning-format", "--reasoning",
		"--reasoning-effort", "--reasoning-budget", "--reasoning-budget-message", "--reasoning-preserve", "--skip-chat-parsing",
		"--prefill-assistant")
	set(Class{Use: PassThrough, Why: "llama-cli's and llama-completion's prompt, conversation and output"},
		"--prompt", "--file", "--binary-file", "--server-base", "--display-prompt", "--color", "--system-prompt",
		"--system-prompt-file", "--single-turn", "--multiline-input", "--image", "--output", "--simple-io", "--prompt-cache",
		"--prompt-cache-all", "--prompt-cache-ro", "--conversation", "--interactive", "--interactive-first", "--in-prefix-bos",
		"--in-prefix", "--in-suffix")
	return m
}
