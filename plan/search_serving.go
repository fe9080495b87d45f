package plan

import (
	"fmt"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan/graph"
)

// searchServing gives the search's base profile what llama-server keeps
// past the load: the checkpoints and process as they will be, and the
// prompt cache as the user fixed it or, while the search places layers
// and context, none: the cache then takes what they leave, up to what it
// is worth (promptCache).
func searchServing(o SearchOptions) SearchOptions {
	if o.loadOnly {
		o.Base.loadOnly = true
		return o
	}
	sv, ok := o.Base.ServingOf()
	if !ok {
		return o
	}
	sv.CacheRAM = 0
	if o.Fixed.CacheRAM != nil {
		sv.CacheRAM = *o.Fixed.CacheRAM
	}
	// Checkpoints, unless given, take what the context leaves too, above
	// the few a conversation's next turn needs.
	if o.Fixed.Checkpoints != nil {
		sv.Checkpoints = *o.Fixed.Checkpoints
	} else {
		sv.Checkpoints = min(sv.Checkpoints, minCheckpoints)
	}
	o.Base.Serving = &sv
	return o
}

// minCheckpoints are the checkpoints a plan keeps before any other use of
// memory past the context: the two a task makes near its prompt's end and
// the one at its last user message, from which the next turn resumes.
const minCheckpoints = 3

// ctxByNeed is the most cells per slot the balanced goal gives a model
// that runs from system memory (no GPU, or one pool shared with the GPU):
// as much context as makes the caches of all slots (f16) as large as the
// weights, at least minCtx. A load then costs at most about as long again
// as reading the weights (llama.cpp clears the whole cache at load: a
// 0.6B model took 2.4 s to answer /health at 1024 cells per slot, 4.0 s
// at 4096 and 8.4 s at 8192 on a 2-core VM), and the rest of the memory
// stays with the OS, other models and the prompt cache. 0 means no cap:
// the caches do not grow with context (recurrent layers only).
func ctxByNeed(m *arch.Model, slots, minCtx int) int {
	c := graph.Context{TypeK: gguf.TypeF16, TypeV: gguf.TypeF16}
	st := seqStateOf(m, c, Defaults())
	if st.perToken == 0 {
		return 0
	}
	var weights int64
	for _, t := range m.Tensors {
		if !t.Unused {
			weights += int64(t.Size)
		}
	}
	perSlot := weights / int64(max(slots, 1))
	fixed := st.fixed + int64(st.window+512)*st.swaPerToken
	n := int((perSlot - fixed) / st.perToken / 256 * 256)
	return max(n, minCtx)
}

// promptCacheTarget is the prompt cache a plan gives llama-server when
// memory allows: room for each slot's whole context (a conversation of
// every slot's full length resumes without being computed again, or many
// shorter ones), at most llama-server's own default.
func promptCacheTarget(m *arch.Model, c graph.Context, p Profile) int {
	sv, ok := p.ServingOf()
	if !ok {
		return 0
	}
	st := seqStateOf(m, c, p)
	entry := st.full(c.NCtxSeq)
	if needsCheckpoints(m, p.SWAFull) && sv.Checkpoints > 0 {
		entry += int64(checkpointsPerSlot(sv, c.NCtxSeq, p.rules().CheckpointsToCap)) * st.partial(c.NCtxSeq)
	}
	mib := int((int64(max(c.NSeq, 1))*entry + 1<<20 - 1) >> 20)
	return min(mib, ServerServing().CacheRAM)
}

// promptCache gives a candidate found with no prompt cache the largest
// one up to promptCacheTarget that keeps the fit target, and judges it
// again; a cache the user fixed is kept as it is.
func promptCache(m *arch.Model, s *hw.Snapshot, o SearchOptions, cpu Device, c *Candidate) {
	sv, ok := c.Profile.ServingOf()
	if !ok || c.Result == nil || c.Result.Resolved == nil {
		return
	}
	a := c.Result
	ctx := *a.Resolved
	judgeWith := func(v Serving) (*Assessment, bool) {
		q := c.Profile
		q.Serving = &v
		r := &Result{Context: ctx, Buffers: a.Buffers, LoadStaging: a.LoadStaging, Serving: servingBuffers(m, ctx, q, cpu)}
		b, err := r.Against(s)
		return b, err == nil && b.Verdict == Fits && b.LeastMargin() >= o.FitTarget
	}
	// Checkpoints first, up to llama-server's default: the most that fit.
	// A model that makes none keeps llama-server's setting: -ctxcp would
	// change nothing.
	if o.Fixed.Checkpoints == nil && !needsCheckpoints(m, c.Profile.SWAFull) {
		sv.Checkpoints = ServerServing().Checkpoints
		c.Profile.Serving = &sv
	}
	if o.Fixed.Checkpoints == nil && needsCheckpoints(m, c.Profile.SWAFull) {
		most := ServerServing().Checkpoints
		n := bisectMost(sv.Checkpoints, most, func(k int) bool {
			v := sv
			v.Checkpoints = k
			_, ok := judgeWith(v)
			return ok
		})
		sv.Checkpoints = n
		c.Profile.Serving = &sv
		if b, ok := judgeWith(sv); ok {
			c.Result, c.MinMargin = b, b.LeastMargin()
		}
	}
	if o.Fixed.CacheRAM != nil {
		return
	}
	judge := func(mib int) (*Assessment, bool) {
		v := sv
		v.CacheRAM = mib
		return judgeWith(v)
	}
	target := promptCacheTarget(m, ctx, c.Profile)
	best, ok := judge(target)
	n := target
	if !ok {
		lo, hi := 0, target-1
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if _, ok := judge(mid); ok {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		n = lo
		// A cache that cannot hold a short conversation (1024 tokens)
		// holds nothing worth its memory: entries larger than the limit
		// are skipped.
		if int64(n)<<20 < minUsefulCache(m, ctx, c.Profile) {
			n = 0
		}
		best, ok = judge(n)
		if !ok {
			return
		}
	}
	sv.CacheRAM = n
	c.Profile.Serving = &sv
	c.Result, c.MinMargin = best, best.LeastMargin()
}

// servingLine says how the plan splits the host memory: context, prompt
// cache, checkpoints and what stays free.
func servingLine(c *Candidate, fixed bool) string {
	a := c.Result
	if a == nil {
		return ""
	}
	sv, ok := c.Profile.ServingOf()
	if !ok {
		return ""
	}
	var kv, cache, ckpt int64
	for _, b := range a.Buffers {
		if b.Kind == KindKV || b.Kind == KindRS {
			kv += b.Bytes
		}
	}
	for _, b := range a.Serving {
		switch b.Kind {
		case KindPromptCache:
			cache += b.Bytes
		case KindCheckpoints:
			ckpt += b.Bytes
		}
	}
	spare := int64(-1)
	for _, d := range a.Domains {
		if d.Serving > 0 {
			spare = d.Margin
		}
	}
	why := "room for every slot's whole context, as much as fits up to llama-server's 8192 MiB"
	switch {
	case fixed:
		why = "as given"
	case sv.CacheRAM == 0:
		why = "none fits beside the context"
	}
	line := fmt.Sprintf("memory while serving: context %d MiB, prompt cache -cram %d (%s)", kv>>20, sv.CacheRAM, why)
	if ckpt > 0 {
		line += fmt.Sprintf(", context checkpoints %d MiB (-ctxcp %d", ckpt>>20, sv.Checkpoints)
		if d := ServerServing().Checkpoints; sv.Checkpoints < d && !fixed {
			line += fmt.Sprintf(" of llama-server's %d: as many as fit beside the context", d)
		}
		line += ")"
	}
	if grow := outputGrowthOf(a); grow > 0 {
		what := "to a batch of embeddings"
		if !c.Profile.Embeds() {
			what = "to the drafted tokens' rows"
		}
		line += fmt.Sprintf(", the output buffers' growth %s %d MiB", what, grow>>20)
	}
	if spare >= 0 {
		line += fmt.Sprintf(", %d MiB of system memory spare", spare>>20)
	}
	return line
}

// minUsefulCache is the smallest prompt cache worth keeping: one entry of
// a 1024-token conversation (or of a slot's whole context, if shorter).
func minUsefulCache(m *arch.Model, c graph.Context, p Profile) int64 {
	sv, _ := p.ServingOf()
	st := seqStateOf(m, c, p)
	n := min(1024, c.NCtxSeq)
	e := st.full(n)
	if needsCheckpoints(m, p.SWAFull) && sv.Checkpoints > 0 {
		e += int64(checkpointsPerSlot(sv, n, p.rules().CheckpointsToCap)) * st.partial(n)
	}
	return e
}

// needCeiling is the most cells per slot the search may give: on system
// memory the balanced goal sizes context to what it is worth (ctxByNeed)
// rather than to all that is free.
func needCeiling(m *arch.Model, o SearchOptions, systemMemory bool, minCtx, ceiling int) int {
	if o.Base.Embeds() && o.Fixed.Ctx == 0 && o.Goal != GoalContext {
		// An embedding input is a passage, not a conversation.
		return min(ceiling, max(minCtx, embeddingCtx))
	}
	if !o.ContextByNeed || !systemMemory || o.Goal != GoalBalanced || o.Fixed.Ctx != 0 {
		return ceiling
	}
	if need := ctxByNeed(m, o.Parallel, minCtx); need > 0 && need < ceiling {
		return need
	}
	return ceiling
}

// servingPlan gives a candidate found with the search's serving base
// its checkpoints and prompt cache, and writes its flags.
func servingPlan(m *arch.Model, s *hw.Snapshot, o SearchOptions, cpu Device, gpus []Device, c *Candidate) {
	promptCache(m, s, o, cpu, c)
	c.Flags = append(c.Profile.Args(), rpcFlags(m.NLayer, c.Profile, cpu, gpus)...)
}

// servingExplain says why the chosen plan's context stops where it does
// on system memory, and how it splits memory while serving.
func servingExplain(c *Candidate, o SearchOptions, ceiling, trained int) []string {
	var out []string
	switch {
	case ceiling < trained && c.CtxPerSlot == ceiling && c.Profile.Embeds():
		out = append(out, fmt.Sprintf("an embedding server's slot holds one input, a passage rather than a conversation: %d cells each (of the %d the model was trained for); --goal context or -c gives more", ceiling, trained))
	case ceiling < trained && c.CtxPerSlot == ceiling:
		out = append(out, fmt.Sprintf("context by need: the model runs from system memory, so each slot gets %d cells, as much as makes the caches as large as the weights (at least --min-ctx), not all that is free: the load stays quick and the rest stays with the system, other models and the prompt cache; --goal context or -c gives more", ceiling))
	}
	if line := servingLine(c, o.Fixed.CacheRAM != nil); line != "" {
		out = append(out, line)
	}
	return out
}
