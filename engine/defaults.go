package engine

import "github.com/headroom-llm/headroom/plan"

// CacheTypes are the K and V cache types llama-server accepts for -ctk and
// -ctv.
func CacheTypes() []string {
	return []string{"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"}
}

// ServerDefaults is the profile llama-server runs when given only -m:
// plan.Defaults with -np's automatic four slots sharing one KV cache, and
// the trained context. fit and the API's fit start from it, so a profile
// left unsaid is the one llama-server would run.
func ServerDefaults() plan.Profile {
	p := plan.Defaults()
	p.Parallel, p.KVUnified = 4, true
	return p
}
