package plan

// Rules are the accounting rules that differ between llama.cpp builds.
// The zero value is the build the accounting was measured against
// (80fb11a); engine.KnownEngines says which build sets which rule, and
// each field says the commit where llama.cpp changed.
type Rules struct {
	// NextNWithoutKV: from de3ff81, the NextN (multi-token prediction)
	// blocks get no KV cache in any architecture (llama_model's memory
	// filter skips il >= n_layer() when n_layer_nextn > 0); 80fb11a left
	// glm4moe's in the cache. Measured with llama-fit-params of both
	// builds: GLM-4.5-Air keeps 752 and 736 MiB of KV at 4096 cells.
	NextNWithoutKV bool `json:"nextn_without_kv,omitempty"`
	// LoadMode: de3ff81's llama-server no longer takes --no-mmap ("error:
	// invalid argument"); loading without mapping is --load-mode none,
	// which 80fb11a already takes beside the deprecated --no-mmap.
	LoadMode bool `json:"load_mode,omitempty"`
}
