package plan

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/graph"
)

// The kinds of memory llama-server holds beyond its load buffers while it
// serves. They are listed apart from the load's buffers (Result.Serving),
// since llama.cpp logs none of them.
const (
	// KindPromptCache is the prompt cache: the state of finished prompts
	// kept in host memory up to -cram MiB (server_prompt_cache).
	KindPromptCache BufferKind = "prompt_cache"
	// KindCheckpoints is the context checkpoints each slot keeps of the
	// state that cannot be rolled back (sliding-window and recurrent
	// layers).
	KindCheckpoints BufferKind = "checkpoints"
	// KindProcess is the process itself beyond its buffers: code, heap,
	// vocabulary, per-slot samplers.
	KindProcess BufferKind = "process"
)

// Serving is llama-server's memory past the load: the prompt cache and the
// context checkpoints (common/common.h's cache_ram_mib, n_ctx_checkpoints,
// checkpoint_min_step, cache_idle_slots in llama.cpp 80fb11a).
type Serving struct {
	// CacheRAM is -cram/--cache-ram in MiB: -1 no byte limit, 0 off.
	CacheRAM int `json:"cache_ram_mib"`
	// Checkpoints is -ctxcp/--ctx-checkpoints, the most per slot.
	Checkpoints int `json:"ctx_checkpoints"`
	// CheckpointMinStep is -cms/--checkpoint-min-step in tokens.
	CheckpointMinStep int `json:"checkpoint_min_step"`
	// CacheIdleSlots is --cache-idle-slots: idle slots are saved to the
	// prompt cache when a new task starts. Their entries count against
	// -cram like any other, so it changes no bound.
	CacheIdleSlots bool `json:"cache_idle_slots"`
}

// ServerServing is llama-server's default: an 8 GiB prompt cache, 32
// checkpoints per slot at least 8192 tokens apart.
func ServerServing() Serving {
	return Serving{CacheRAM: 8192, Checkpoints: 32, CheckpointMinStep: 8192, CacheIdleSlots: true}
}

// ServingOf is what the profile's program keeps while serving: its own
// settings, else the program's defaults (llama-server's, which llama-cli
// shares since it runs llama-server in a thread); ok is false for programs
// that keep neither a prompt cache nor checkpoints (llama-completion, a
// library context).
func (p Profile) ServingOf() (Serving, bool) {
	switch p.Program.OrServer() {
	case ProgramServer, ProgramCLI:
	default:
		return Serving{}, false
	}
	if p.loadOnly {
		return Serving{}, false
	}
	if p.Serving != nil {
		return *p.Serving, true
	}
	return ServerServing(), true
}

// Check says what is wrong with serving settings llama-server would
// refuse or misread.
func (s Serving) Check() error {
	switch {
	case s.CacheRAM < -1:
		return fmt.Errorf("-cram %d: want -1 (no limit), 0 (off) or a size in MiB", s.CacheRAM)
	case s.Checkpoints < 0:
		return fmt.Errorf("-ctxcp %d: want 0 or more checkpoints per slot", s.Checkpoints)
	case s.CheckpointMinStep < 0:
		return fmt.Errorf("-cms %d: want 0 or more tokens (llama.cpp refuses a negative step)", s.CheckpointMinStep)
	}
	return nil
}

// seqState sizes one sequence's state as llama_state_seq_get_size_ext
// reports it (llama-kv-cache.cpp state_write, llama-memory-recurrent.cpp
// state_write): every cell the sequence holds, K and V rows of each
// layer with a cache, except cells a sliding window masks; and the
// sequence's recurrent rows.
type seqState struct {
	// perToken is K and V bytes per token over full-attention layers.
	perToken int64
	// swaPerToken is the same over sliding-window layers, which keep at
	// most window unmasked cells of a sequence.
	swaPerToken int64
	window      int
	// fixed is the sequence's recurrent state, whatever its length.
	fixed int64
	// header is what the state holds besides cells and rows.
	header int64
	// draft is the speculative draft context's state of the same
	// sequence, which llama-server saves beside the target's in a prompt
	// cache entry and in every checkpoint; nil without one. plainDraft:
	// the draft's memory is one plain KV cache, which writes its whole
	// state even when asked for the partial one (PARTIAL_ONLY is a
	// hybrid's or iswa cache's flag), so a checkpoint holds all of it.
	draft      *seqState
	plainDraft bool
}

// cellMeta bounds what the state holds per cell besides the rows: its
// position, sequence count and id (12 bytes), and a cell's extension
// where the model has one.
const cellMeta = 32

// stateHeader bounds the state's own headers besides its layers': stream
// and cell counts, and what an entry of the prompt cache keeps besides
// the state (its node, vectors and token list's header).
const stateHeader = 1 << 10

// layerHeader bounds each layer's headers in the state: K's and V's type
// and row size (12 bytes each), in each of an iswa model's two caches.
const layerHeader = 64

func seqStateOf(m *arch.Model, c graph.Context, p Profile) seqState {
	s := layerState(m, c, p)
	switch {
	case p.Spec.MTP() && len(m.MTPHead) > 0:
		d := seqState{header: stateHeader + layerHeader*int64(len(m.MTPHead))}
		dc := draftContext(c, p.Spec)
		for _, l := range m.MTPHead {
			d.perToken += kvRow(dc, l)
		}
		s.draft, s.plainDraft = &d, true
	case p.Companions != nil && p.Companions.Draft != nil:
		dm := p.Companions.Draft
		dc := draftContext(c, p.Spec)
		d := layerState(dm, dc, Profile{Rules: p.Rules})
		s.draft, s.plainDraft = &d, !needsCheckpoints(dm, true) && dm.Window == 0
	}
	return s
}

// kvRow is a cached layer's K and V bytes per token.
func kvRow(c graph.Context, l arch.Layer) int64 {
	k, _ := c.TypeK.RowSize(uint64(l.KDim))
	row := int64(k)
	if l.VDim > 0 {
		v, _ := c.TypeV.RowSize(uint64(l.VDim))
		row += int64(v)
	}
	return row
}

// layerState is one model's sequence state over its own layers.
func layerState(m *arch.Model, c graph.Context, p Profile) seqState {
	s := seqState{window: m.Window, header: stateHeader + layerHeader*int64(len(m.Layers))}
	nextNWithoutKV := p.rules().NextNWithoutKV
	for i, l := range m.Layers {
		if l.Recurrent {
			s.fixed += 4 * int64(l.RDim+l.SDim)
		}
		if l.Attention == arch.NoAttention || (nextNWithoutKV && i >= m.NLayer-m.NextN) {
			continue
		}
		row := kvRow(c, l)
		if l.Attention == arch.Sliding {
			s.swaPerToken += row
		} else {
			s.perToken += row
		}
	}
	return s
}

// full is the state of a sequence of n tokens: what a prompt cache entry
// holds of the model (llama_state_seq_get_size_ext, no flags).
func (s seqState) full(n int) int64 {
	w := n
	if s.window > 0 {
		w = min(n, s.window)
	}
	meta := int64(0)
	if s.perToken > 0 {
		meta += cellMeta * int64(n)
	}
	if s.swaPerToken > 0 {
		meta += cellMeta * int64(w)
	}
	n64 := int64(n)*s.perToken + int64(w)*s.swaPerToken + s.fixed + meta + s.header
	if s.draft != nil {
		n64 += s.draft.full(n)
	}
	return n64
}

// partial is a checkpoint's state (LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY):
// the sliding-window cells and the recurrent rows, the parts that cannot
// be rolled back.
func (s seqState) partial(n int) int64 {
	w := n
	if s.window > 0 {
		w = min(n, s.window)
	}
	if s.swaPerToken == 0 {
		w = 0
	}
	part := int64(w)*(s.swaPerToken+cellMeta) + s.fixed + s.header
	switch {
	case s.draft != nil && s.plainDraft:
		part += s.draft.full(n)
	case s.draft != nil:
		part += s.draft.partial(n)
	}
	return part
}

// tokenBytes bounds what one more token adds to a sequence's state, the
// draft's included.
func (s seqState) tokenBytes() int64 {
	b := s.perToken + s.swaPerToken + 2*cellMeta
	if s.draft != nil {
		b += s.draft.tokenBytes()
	}
	return b
}

// needsCheckpoints is llama-server's rule for making checkpoints
// (server-context.cpp, do_checkpoint): a model whose memory cannot drop a
// sequence's tail, recurrent layers, or sliding-window layers without
// --swa-full.
func needsCheckpoints(m *arch.Model, swaFull bool) bool {
	for _, l := range m.Layers {
		if l.Recurrent || (l.Attention == arch.Sliding && !swaFull) {
			return true
		}
	}
	return false
}

// checkpointsPerSlot bounds the checkpoints one slot holds at once. A
// task makes two near the end of its prompt (4 + n_ubatch and 4 tokens
// before it), one at its last user message, and one at each user message
// more than -cms tokens past the previous; the oldest go once -ctxcp are
// kept (server-context.cpp create_checkpoint). Before PR #28302 every new
// checkpoint also erased those of earlier tasks within -cms of a kept
// one, so a slot held at most the spaced ones of earlier tasks and of
// this one, and the three; since, a conversation keeps -ctxcp.
func checkpointsPerSlot(s Serving, nCtxSeq int, toCap bool) int {
	if toCap {
		return s.Checkpoints
	}
	spaced := nCtxSeq/(s.CheckpointMinStep+1) + 1
	return min(s.Checkpoints, 2*spaced+3)
}

// The llama-server process beyond every buffer llama.cpp logs: its code,
// heap, vocabulary and tokenizer, and each slot's sampler and token
// buffers. Measured as the peak resident memory of serving workloads less
// every buffer (docs/serving.md: 31.9-132.7 MiB on five architectures of
// 50k to 262k tokens, one and four slots); these bound every one of them.
// A BPE vocabulary's merges cost about as much again as its tokens, so
// the bound per token is a BPE one (an SPM vocabulary such as Gemma's
// measured 48 MiB where this says 134).
const (
	processBase     = 48 << 20
	processPerVocab = 384
	processPerSlot  = 6 << 20
)

// servingBuffers lists what llama-server holds in host memory past the
// load: the prompt cache at its bound, each slot's checkpoints, and the
// process. None is on a GPU: the prompt cache and checkpoints are
// std::vector copies in the server's heap, wherever the KV cache lives.
func servingBuffers(m *arch.Model, c graph.Context, p Profile, cpu Device) []Buffer {
	sv, ok := p.ServingOf()
	if !ok {
		return nil
	}
	st := seqStateOf(m, c, p)
	var out []Buffer
	slots := max(c.NSeq, 1)
	ckpt := int64(0)
	if sv.Checkpoints > 0 && needsCheckpoints(m, p.SWAFull) {
		per := checkpointsPerSlot(sv, c.NCtxSeq, p.rules().CheckpointsToCap)
		ckpt = st.partial(c.NCtxSeq)
		out = append(out, Buffer{Device: cpu.Name, BufferType: cpu.Name, Kind: KindCheckpoints,
			Bytes: int64(slots*per) * ckpt,
			Note:  fmt.Sprintf("%d slots x %d checkpoints of %.2f MiB (-ctxcp %d, -cms %d)", slots, per, float64(ckpt)/(1<<20), sv.Checkpoints, sv.CheckpointMinStep)})
	}
	switch {
	case sv.CacheRAM > 0:
		out = append(out, Buffer{Device: cpu.Name, BufferType: cpu.Name, Kind: KindPromptCache,
			Bytes: int64(sv.CacheRAM) << 20,
			Note:  fmt.Sprintf("-cram %d: finished prompts' states, up to %d MiB (one prompt of %d tokens is %.2f MiB)", sv.CacheRAM, sv.CacheRAM, c.NCtxSeq, float64(st.full(c.NCtxSeq)+int64(checkpointsPerSlot(sv, c.NCtxSeq, p.rules().CheckpointsToCap))*ckpt)/(1<<20))})
	case sv.CacheRAM < 0:
		// No byte limit: the cache keeps at most n_ctx tokens of prompts
		// (its token limit), trimmed after each save, so one more prompt
		// of n_ctx_seq tokens for a moment; every entry also holds the
		// fixed parts (recurrent rows, window, checkpoints), and an entry
		// may be a single token.
		entries := int64(c.NCtx + 1)
		perEntry := st.full(0) + int64(checkpointsPerSlot(sv, c.NCtxSeq, p.rules().CheckpointsToCap))*ckpt
		tokens := int64(c.NCtx + c.NCtxSeq)
		out = append(out, Buffer{Device: cpu.Name, BufferType: cpu.Name, Kind: KindPromptCache,
			Bytes: tokens*st.tokenBytes() + entries*perEntry,
			Note:  fmt.Sprintf("-cram -1: no byte limit; up to %d tokens of prompts (n_ctx) and one more prompt", c.NCtx)})
	}
	out = append(out, outputGrowth(m, c, p, cpu)...)
	out = append(out, specOutputGrowth(m, c, p, cpu)...)
	vocab := int64(max(m.NVocab, 0))
	out = append(out, Buffer{Device: cpu.Name, BufferType: cpu.Name, Kind: KindProcess,
		Bytes: processBase + processPerVocab*vocab + processPerSlot*int64(slots),
		Note:  "llama-server's code, heap and vocabulary beyond its buffers (measured, docs/serving.md)"})
	return out
}

// servingWords says what a server grows by past its load, for a verdict.
func servingWords(bufs []Buffer) string {
	var parts []string
	for _, b := range bufs {
		switch b.Kind {
		case KindPromptCache:
			parts = append(parts, fmt.Sprintf("a prompt cache of up to %s", mib(b.Bytes)))
		case KindCheckpoints:
			parts = append(parts, fmt.Sprintf("context checkpoints %s", mib(b.Bytes)))
		case KindProcess:
			parts = append(parts, fmt.Sprintf("the process %s", mib(b.Bytes)))
		}
	}
	return strings.Join(parts, ", ")
}

// servingFixes are the changes to what llama-server keeps while serving
// that make the profile fit: the largest prompt cache (-cram, in MiB)
// and, where checkpoints are counted, the most checkpoints per slot.
func servingFixes(p Profile, fitsWith func(Profile) bool) []Fix {
	sv, ok := p.ServingOf()
	if !ok {
		return nil
	}
	with := func(f func(*Serving)) Profile {
		q, s := p, sv
		f(&s)
		q.Serving = &s
		return q
	}
	var out []Fix
	if sv.CacheRAM != 0 && fitsWith(with(func(s *Serving) { s.CacheRAM = 0 })) {
		hi := sv.CacheRAM - 1
		if sv.CacheRAM < 0 {
			hi = 1 << 20
		}
		lo := 0
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if fitsWith(with(func(s *Serving) { s.CacheRAM = mid })) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		if lo > 0 {
			n := lo
			out = append(out, newFix(p, Change{CacheRAM: &n}, fmt.Sprintf("a prompt cache of %d MiB instead of %s fits: llama-server keeps fewer finished prompts to resume without recomputing", n, cacheRAMWords(sv.CacheRAM))))
		} else {
			zero := 0
			out = append(out, newFix(p, Change{CacheRAM: &zero}, "no prompt cache fits: every new conversation, and every return to an earlier one, is computed again"))
		}
	}
	if sv.Checkpoints > 0 && fitsWith(with(func(s *Serving) { s.Checkpoints = 0 })) && !fitsWith(with(func(s *Serving) {})) {
		lo, hi := 0, sv.Checkpoints-1
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if fitsWith(with(func(s *Serving) { s.Checkpoints = mid })) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		n := lo
		out = append(out, newFix(p, Change{Checkpoints: &n}, fmt.Sprintf("at most %d context checkpoints per slot instead of %d fits: a prompt that differs inside the window is computed again from further back", n, sv.Checkpoints)))
	}
	return out
}

// cacheRAMWords says a -cram value.
func cacheRAMWords(n int) string {
	if n < 0 {
		return "no limit (-cram -1)"
	}
	return fmt.Sprintf("%d MiB", n)
}

// flags renders the settings that differ from llama-server's defaults as
// its flags; none for nil (the defaults).
func (s *Serving) flags() []string {
	if s == nil {
		return nil
	}
	d := ServerServing()
	var f []string
	if s.CacheRAM != d.CacheRAM {
		f = append(f, cacheRAMFlag(s.CacheRAM)...)
	}
	if s.Checkpoints != d.Checkpoints {
		f = append(f, checkpointsFlag(s.Checkpoints)...)
	}
	if s.CheckpointMinStep != d.CheckpointMinStep {
		f = append(f, "-cms", strconv.Itoa(s.CheckpointMinStep))
	}
	if !s.CacheIdleSlots && s.CacheRAM != 0 {
		f = append(f, "--no-cache-idle-slots")
	}
	return f
}
