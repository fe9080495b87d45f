package builds

import "fmt"

// A change is one accounting rule that llama.cpp changed at a known
// build: builds from From on behave the newer way, builds before it the
// older way. Where the change is only bounded, or came in steps of which
// the later ones are not modeled, builds in [From, Until) get the newer
// rule and the note says so.
type change struct {
	From, Until int
	// What names the change and where its build number comes from.
	What string
	// Rule is the field of Rules the change turns on.
	Rule func(*Rules) *bool
}

// changes are the changes headroom models, by the build that made them:
// adding one is a row here and a field of Rules. A build number is the
// bNNNN of llama.cpp's release tags (git rev-list --count of the commit),
// which --version prints as "version: NNNN (commit)" or, from b10394,
// "version: X.Y.Z (build NNNN, commit C)". Each first build was read from
// the release tag that contains the pull request's merge commit (git
// rev-list --count of it) or, for the changes of September 2026, from
// the release notes that name the pull request.
func changes() []change {
	return []change{
		{From: 2540, What: "the last layer computed only the output rows (PR #6122, b2540)",
			Rule: func(r *Rules) *bool { return &r.OutIDs }},
		{From: 5837, Until: 6412, What: "gptneox took Q, K and V as strided views of the fused projection (PRs #14568 at b5837, #15380 at b6195 and #15662 at b6412; between them V was still copied, which is not modeled)",
			Rule: func(r *Rules) *bool { return &r.QKVViews }},
		{From: 6049, What: "an -ot override to the CPU is placed like a CPU layer's weight (b6049)",
			Rule: func(r *Rules) *bool { return &r.OverrideCPUExtra }},
		{From: 6071, What: "the KV cache is written with ggml_set_rows by default (PR #14959, b6071)",
			Rule: func(r *Rules) *bool { return &r.KVSetRows }},
		{From: 6460, What: "Metal reorders a split for concurrency (PR #15929, build 6460, first tag b6469)",
			Rule: func(r *Rules) *bool { return &r.MetalReorder }},
		{From: 6501, What: "a Metal buffer over the mapped file has the span's size (PR #15995, b6501)",
			Rule: func(r *Rules) *bool { return &r.MetalMappedSpan }},
		{From: 7819, What: "build_inp_embd makes both inputs and selects one (PR #18898, b7819)",
			Rule: func(r *Rules) *bool { return &r.EmbdSelect }},
		{From: 9410, What: "the KQ mask is made F16 for flash attention (PR #23764, b9410)",
			Rule: func(r *Rules) *bool { return &r.MaskF16 }},
		{From: 9460, What: "the worst-case graph keeps n_outputs_max rows (PR #23861, b9460)",
			Rule: func(r *Rules) *bool { return &r.ReserveOutputsMax }},
		{From: 10115, Until: 10810, What: "--mlock loads the weights into host buffers and locks them instead of locking the mapped file (PR #26135, between b10114, which issue #26110 reports without it, and b10809, seen with it)",
			Rule: func(r *Rules) *bool { return &r.MlockLoads }},
		{From: 10751, What: "CUDA fuses the MoE weighted reduction and keeps its inputs alive (PR #25952, b10751)",
			Rule: func(r *Rules) *bool { return &r.CUDAReduceDeps }},
		{From: 10810, Until: 11147, What: "CUDA keeps a fused top-k MoE selection's inputs alive (between v0.4.0, b10809, and v0.5.0, b11146; the pull request is not known)",
			Rule: func(r *Rules) *bool { return &r.CUDATopKDeps }},
		{From: 10810, Until: 11147, What: "Metal packs its fusions before it reorders (between v0.4.0, b10809, and v0.5.0, b11146; the pull request is not known)",
			Rule: func(r *Rules) *bool { return &r.MetalFusion }},
		{From: 10829, What: "the gated delta net's L2 norm is an RMS norm and a scale (PR #28068, b10829)",
			Rule: func(r *Rules) *bool { return &r.GDNNormAsRMS }},
		{From: 10833, Until: 10900, What: "the Vulkan graph reorder keeps fused runs together (PRs #28024 at b10833, #27220 at b10858 and #28422 at b10900; between them only some of the fusions are in, which is not modeled)",
			Rule: func(r *Rules) *bool { return &r.VulkanFusion }},
		{From: 10834, What: "a split's inputs grow past 30 instead of starting a split (PR #28387, b10834)",
			Rule: func(r *Rules) *bool { return &r.SplitInputsGrow }},
		{From: 10875, What: "--no-mmap is gone; a load without mapping is --load-mode none (PR #28334, b10875)",
			Rule: func(r *Rules) *bool { return &r.LoadMode }},
		{From: 10907, What: "multi-token-prediction layers get no KV cache (PR #28630, b10907)",
			Rule: func(r *Rules) *bool { return &r.NextNWithoutKV }},
		{From: 10810, Until: 11147, What: "llama-server keeps up to -ctxcp context checkpoints per slot, erasing those within -cms of another only when that many are held (PR #28302, merged 2026-09-03, between v0.4.0, b10809, and v0.5.0, b11146; its build number is not known)",
			Rule: func(r *Rules) *bool { return &r.CheckpointsToCap }},
	}
}

// Oldest is the oldest build the table covers: before PR #6122 the
// output buffer also held n_batch rows of logits, which depends on flags
// rather than the build alone and is not applied.
const Oldest = 2540

// For gives the rules of build n as the table decides them.
func For(n int) Rules {
	var r Rules
	for _, c := range changes() {
		*c.Rule(&r) = n >= c.From
	}
	return r
}

// Ruling is what the table says of one build number.
type Ruling struct {
	Number int   `json:"number"`
	Rules  Rules `json:"rules"`
	// Predates lists the changes this build comes before: their older
	// rule is applied.
	Predates []string `json:"predates,omitempty"`
	// Uncertain lists the changes whose first build is only bounded and
	// whose bounds hold this build: it gets the newer rule.
	Uncertain []string `json:"uncertain,omitempty"`
	// Outside says why the build lies outside the table, "" within it.
	Outside string `json:"outside,omitempty"`
}

// Ruled works out the rules of build n from the table, with what it
// predates, where the table is unsure, and whether n lies outside it.
func Ruled(n int) Ruling {
	br := Ruling{Number: n, Rules: For(n)}
	for _, c := range changes() {
		on := n >= c.From
		if !on {
			br.Predates = append(br.Predates, c.What)
		}
		if c.Until > 0 && on && n < c.Until {
			br.Uncertain = append(br.Uncertain, c.What)
		}
	}
	newest := Newest()
	switch {
	case n < Oldest:
		br.Outside = fmt.Sprintf("build %d is older than b%d, the oldest whose rules headroom has: before it the output buffer held n_batch rows of logits, which is not applied", n, Oldest)
	case n > newest.Number:
		br.Outside = fmt.Sprintf("build %d is newer than b%d (%s), the newest whose rules headroom has: the figures follow b%d's, and what changed since is not known", n, newest.Number, newest.Release, newest.Number)
	}
	return br
}
