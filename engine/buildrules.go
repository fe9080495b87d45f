package engine

import (
	"fmt"

	"github.com/headroom-llm/headroom/plan"
)

// A ruleChange is one accounting rule that llama.cpp changed at a known
// build: builds from From on behave the later way, builds before it the
// earlier way. Where the change is only bounded, or came in steps of
// which the later ones are not modeled, builds in [From, Until) get the
// later rule and the note says so.
type ruleChange struct {
	From, Until int
	// What names the change and where its build number comes from.
	What string
	// Set gives r the rule of a build before From (older) or from it.
	Set func(r *plan.Rules, older bool)
}

// ruleChanges are the changes headroom models, by the build that made
// them. A build number is the bNNNN of llama.cpp's release tags
// (git rev-list --count of the commit), which --version prints as
// "version: NNNN (commit)" or, from b10394, "version: X.Y.Z (build NNNN,
// commit C)". Each first build was read from the release tag that
// contains the pull request's merge commit (git rev-list --count of it)
// or, for the changes of September 2026, from the release notes that
// name the pull request.
func ruleChanges() []ruleChange {
	return []ruleChange{
		{From: 2540, What: "the last layer computed only the output rows (PR #6122, b2540)",
			Set: func(r *plan.Rules, older bool) { r.NoOutIDs = older }},
		{From: 5837, Until: 6412, What: "gptneox took Q, K and V as strided views of the fused projection (PRs #14568 at b5837, #15380 at b6195 and #15662 at b6412; between them V was still copied, which is not modeled)",
			Set: func(r *plan.Rules, older bool) { r.QKVCont = older }},
		{From: 6049, What: "an -ot override to the CPU is placed like a CPU layer's weight (b6049)",
			Set: func(r *plan.Rules, older bool) { r.OverrideCPUPlain = older }},
		{From: 6071, What: "the KV cache is written with ggml_set_rows by default (PR #14959, b6071)",
			Set: func(r *plan.Rules, older bool) { r.KVCopy = older }},
		{From: 6460, What: "Metal reorders a split for concurrency (PR #15929, build 6460, first tag b6469)",
			Set: func(r *plan.Rules, older bool) { r.NoMetalReorder = older }},
		{From: 6501, What: "a Metal buffer over the mapped file has the span's size (PR #15995, b6501)",
			Set: func(r *plan.Rules, older bool) { r.MetalMappedOffset = older }},
		{From: 7819, What: "build_inp_embd makes both inputs and selects one (PR #18898, b7819)",
			Set: func(r *plan.Rules, older bool) { r.NoEmbdSelect = older }},
		{From: 9410, What: "the KQ mask is made F16 for flash attention (PR #23764, b9410)",
			Set: func(r *plan.Rules, older bool) { r.MaskCast = older }},
		{From: 9460, What: "the worst-case graph keeps n_outputs_max rows (PR #23861, b9460)",
			Set: func(r *plan.Rules, older bool) { r.ReserveAllOutputs = older }},
		{From: 10751, What: "CUDA fuses the MoE weighted reduction and keeps its inputs alive (PR #25952, b10751)",
			Set: func(r *plan.Rules, older bool) { r.NoCUDAReduceDeps = older }},
		{From: 10810, Until: 11147, What: "CUDA keeps a fused top-k MoE selection's inputs alive, and Metal packs its fusions before it reorders (between v0.4.0, b10809, and v0.5.0, b11146; the pull requests are not known)",
			Set: func(r *plan.Rules, older bool) { r.CUDATopKDeps, r.MetalFusion = !older, !older }},
		{From: 10829, What: "the gated delta net's L2 norm is an RMS norm and a scale (PR #28068, b10829)",
			Set: func(r *plan.Rules, older bool) { r.GDNNormAsRMS = !older }},
		{From: 10833, Until: 10900, What: "the Vulkan graph reorder keeps fused runs together (PRs #28024 at b10833, #27220 at b10858 and #28422 at b10900; between them only some of the fusions are in, which is not modeled)",
			Set: func(r *plan.Rules, older bool) { r.VulkanFusion = !older }},
		{From: 10834, What: "a split's inputs grow past 30 instead of starting a split (PR #28387, b10834)",
			Set: func(r *plan.Rules, older bool) { r.SplitInputsGrow = !older }},
		{From: 10875, What: "--no-mmap is gone; a load without mapping is --load-mode none (PR #28334, b10875)",
			Set: func(r *plan.Rules, older bool) { r.LoadMode = !older }},
		{From: 10907, What: "multi-token-prediction layers get no KV cache (PR #28630, b10907)",
			Set: func(r *plan.Rules, older bool) { r.NextNWithoutKV = !older }},
	}
}

// NewestRuled is the newest build whose rules the table decides: v0.5.0,
// the build of de3ff81's rules. What changed after it is not known here.
const NewestRuled = 11146

// OldestRuled is the oldest build the table covers: before PR #6122 the
// output buffer also held n_batch rows of logits, which depends on flags
// rather than the build alone and is not applied.
const OldestRuled = 2540

// BuildRules are the rules of a llama.cpp build known by its number.
type BuildRules struct {
	Number int        `json:"number"`
	Rules  plan.Rules `json:"rules"`
	// Predates lists the changes this build comes before: their earlier
	// rule is applied.
	Predates []string `json:"predates,omitempty"`
	// Uncertain lists the changes whose first build is only bounded and
	// whose bounds hold this build: it gets the later rule.
	Uncertain []string `json:"uncertain,omitempty"`
	// Outside says why the build lies outside the table, "" within it.
	Outside string `json:"outside,omitempty"`
}

// RulesForBuild works out the rules of build n from the table.
func RulesForBuild(n int) BuildRules {
	br := BuildRules{Number: n}
	for _, c := range ruleChanges() {
		c.Set(&br.Rules, n < c.From)
		if n < c.From {
			br.Predates = append(br.Predates, c.What)
		}
		if c.Until > 0 && n >= c.From && n < c.Until {
			br.Uncertain = append(br.Uncertain, c.What)
		}
	}
	switch {
	case n < OldestRuled:
		br.Outside = fmt.Sprintf("build %d is older than b%d, the oldest whose rules headroom has: before it the output buffer held n_batch rows of logits, which is not applied", n, OldestRuled)
	case n > NewestRuled:
		br.Outside = fmt.Sprintf("build %d is newer than b%d (v0.5.0), the newest whose rules headroom has: the figures follow b%d's, and what changed since is not known", n, NewestRuled, NewestRuled)
	}
	return br
}
