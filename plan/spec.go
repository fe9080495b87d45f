package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan/graph"
)

// Speculative is llama-server's speculative decoding as a command line
// sets it (--spec-type, --spec-draft-n-max, -ctkd, -ctvd). llama-server
// makes one draft context beside the target's, whatever the type: on the
// -md model's weights (draft-simple) or on the target model's own MTP
// head (draft-mtp). The draft types that carry hidden states
// (draft-mtp) also keep n_max recurrent snapshots per sequence in the
// target context so a rejected draft can be rolled back.
type Speculative struct {
	// Types are the --spec-type names, llama.cpp's spelling.
	Types []string `json:"types,omitempty"`
	// DraftMax is --spec-draft-n-max; 0 is llama.cpp's default,
	// DraftTokens.
	DraftMax int `json:"draft_max,omitempty"`
	// CacheK and CacheV are the draft context's cache types (-ctkd,
	// -ctvd); "" is llama.cpp's default, f16, whatever the target's.
	CacheK string `json:"cache_type_k_draft,omitempty"`
	CacheV string `json:"cache_type_v_draft,omitempty"`
}

// Speculative types headroom counts.
const (
	SpecNone  = "none"
	SpecDraft = "draft-simple"
	SpecMTP   = "draft-mtp"
)

// SpecTypes are the --spec-type names headroom counts; the pinned builds
// have more (draft-eagle3, draft-dflash, draft-dspark and the n-gram
// types), which the command line refuses with the reason.
func SpecTypes() []string { return []string{SpecNone, SpecDraft, SpecMTP} }

// has reports whether the types include t.
func (s *Speculative) has(t string) bool { return s != nil && slices.Contains(s.Types, t) }

// MTP reports whether the draft context runs on the target's own MTP
// head (--spec-type draft-mtp).
func (s *Speculative) MTP() bool { return s.has(SpecMTP) }

// nMax is common_speculative_n_max: the most tokens a slot drafts, for
// the draft types; 0 when no type drafts (a -md model without
// --spec-type is loaded and never asked).
func (s *Speculative) nMax() int {
	if !s.has(SpecDraft) && !s.has(SpecMTP) {
		return 0
	}
	if s.DraftMax > 0 {
		return s.DraftMax
	}
	return DraftTokens
}

// loads reports whether llama.cpp loads weight t for the profile: every
// weight but the NextN (MTP) blocks' (arch.Tensor.Unused), which it
// loads only to draft with them.
func (p Profile) loads(t arch.Tensor) bool { return !t.Unused || p.Spec.MTP() }

// rsSeq is the target context's n_rs_seq
// (common_params_speculative::need_n_rs_seq): a draft of hidden states
// keeps one recurrent snapshot per drafted token to roll back to.
func (s *Speculative) rsSeq() int {
	if !s.MTP() {
		return 0
	}
	return s.nMax()
}

// cacheTypes are the draft context's K and V cache types.
func (s *Speculative) cacheTypes() (string, string) {
	k, v := "f16", "f16"
	if s != nil && s.CacheK != "" {
		k = s.CacheK
	}
	if s != nil && s.CacheV != "" {
		v = s.CacheV
	}
	return k, v
}

// flags are the llama-server flags that set it.
func (s *Speculative) flags() []string {
	if s == nil {
		return nil
	}
	var f []string
	if types := slices.DeleteFunc(slices.Clone(s.Types), func(t string) bool { return t == SpecNone }); len(types) > 0 {
		f = append(f, "--spec-type", strings.Join(types, ","))
	}
	if s.DraftMax > 0 && s.DraftMax != DraftTokens {
		f = append(f, "--spec-draft-n-max", strconv.Itoa(s.DraftMax))
	}
	if k, v := s.cacheTypes(); k != "f16" || v != "f16" {
		f = append(f, "-ctkd", k, "-ctvd", v)
	}
	return f
}

// CheckSpeculative says why the model cannot run the profile's
// speculative decoding, or nil.
func CheckSpeculative(m *arch.Model, p Profile) error {
	s := p.Spec
	if s.has(SpecDraft) && (p.Companions == nil || p.Companions.Draft == nil) {
		return fmt.Errorf("--spec-type draft-simple drafts with a draft model: give it with -md")
	}
	if !s.MTP() {
		return nil
	}
	switch {
	case m.NextN == 0:
		return fmt.Errorf("--spec-type draft-mtp: the model has no MTP head (no nextn_predict_layers blocks)")
	case len(m.MTPHead) == 0:
		return fmt.Errorf("--spec-type draft-mtp: headroom models the MTP draft context of Qwen3.5 and 3.6 (qwen35, qwen35moe) only, not %s's", m.Arch)
	case len(m.MTPHead) != 1:
		return fmt.Errorf("--spec-type draft-mtp: llama.cpp runs a single MTP block, the model has %d", len(m.MTPHead))
	case p.Companions != nil && p.Companions.Draft != nil:
		return fmt.Errorf("--spec-type draft-mtp drafts with the model's own head: a -md model besides it is not counted by headroom")
	case graph.ForMTP(m) == nil:
		// Without the replay the draft context's compute buffer would
		// go uncounted.
		return fmt.Errorf("--spec-type draft-mtp: this file's MTP block lacks a tensor graph_mtp reads, or has one headroom does not replay")
	}
	return nil
}

// draftContext is the draft context as llama-server makes it
// (common_speculative_init_result), on the target's MTP head or a -md
// model: the target's cells, sequences, batches and flash attention, its
// own cache types, one output row per sequence, no recurrent snapshots.
func draftContext(c graph.Context, s *Speculative) graph.Context {
	d := c
	k, v := s.cacheTypes()
	d.TypeK, _ = CacheType(k)
	d.TypeV, _ = CacheType(v)
	d.NOutputsMax = max(c.NSeq, 1)
	d.NRSSeq = 0
	d.Embeddings, d.Pooling = false, 0
	return d
}

// mtpBuffers are the MTP draft context's buffers: a KV cache of the MTP
// block's layer on its device, an output buffer of one row of logits
// per sequence, and the compute buffers of graph_mtp. The weights are
// the target's (its NextN tensors, loaded with the head).
func mtpBuffers(m *arch.Model, c graph.Context, p Profile, cpu Device, gpus []Device, layerDev []string) []Buffer {
	if !p.Spec.MTP() || len(m.MTPHead) == 0 {
		return nil
	}
	d := draftContext(c, p.Spec)
	var out []Buffer
	for i, l := range m.MTPHead {
		dev := layerDev[m.NLayer-m.NextN+i]
		if p.NoKVOffload {
			dev = cpu.Name
		}
		k, _ := d.TypeK.RowSize(uint64(l.KDim))
		v, _ := d.TypeV.RowSize(uint64(l.VDim))
		cells := int64(d.NCtxSeq) * int64(d.NStream)
		out = append(out, Buffer{Device: dev, BufferType: bufferTypeOn(dev, gpus), Kind: KindKV, Model: ModelDraft,
			Bytes: (int64(k) + int64(v)) * cells, Largest: max(int64(k), int64(v)) * cells})
	}
	o := outputBuffer(m, d, p.rules(), cpu, gpus, layerDev)
	o.Model = ModelDraft
	out = append(out, o)
	build := graph.ForMTP(m)
	if build == nil {
		// placeModel's CheckSpeculative refuses such a model first.
		return out
	}
	if len(gpus) == 0 {
		out = append(out, Buffer{Device: cpu.Name, BufferType: cpu.Name, Kind: KindCompute, Model: ModelDraft,
			Bytes: cpuComputeBytes(d, p.rules(), build), Note: replayNote})
		return out
	}
	for _, b := range splitComputeBuffers(m, d, p, cpu, gpus, layerDev, weightHomes(m, p, cpu, gpus, layerDev), nil, build) {
		b.Model = ModelDraft
		out = append(out, b)
	}
	return out
}

// mtpOffer says what drafting with the model's MTP head would cost on
// top of the chosen plan, for a model that carries one and a plan that
// does not draft: the head's weights (loaded only then), the draft
// context, the target's recurrent snapshots and drafted rows, and the
// draft's state in the prompt cache and checkpoints, and whether the
// plan would still keep its margin: one line, or none where there is
// nothing to offer.
func mtpOffer(m *arch.Model, s *hw.Snapshot, c *Candidate, cpu Device, gpus []Device, margin int64) []string {
	if c == nil || c.Result == nil || c.Profile.Spec != nil || c.Profile.Embeds() || c.Profile.Companions != nil || graph.ForMTP(m) == nil {
		return nil
	}
	q := c.Profile
	q.Spec = &Speculative{Types: []string{SpecMTP}}
	r, err := Account(m, q, cpu, gpus)
	if err != nil {
		return nil
	}
	a, err := r.Against(s)
	if err != nil {
		return nil
	}
	required := func(ds []hw.DomainUse) int64 {
		var n int64
		for _, d := range ds {
			n += d.Required
		}
		return n
	}
	load := required(a.Load) - required(c.Result.Load)
	serving := required(a.Domains) - required(c.Result.Domains) - load
	verdict := "the plan keeps its margin"
	if a.Verdict != Fits || a.LeastMargin() < margin {
		verdict = "more than this plan leaves free: ask for it with a smaller -c or fewer -ctxcp"
	}
	return []string{fmt.Sprintf("this file carries an MTP head: --spec-type draft-mtp drafts with it, each slot up to %d tokens a step, for %d MiB more at load (the draft context, recurrent snapshots) and %d MiB more while serving (the draft's cache is copied whole into each prompt and context checkpoint); %s",
		DraftTokens, load>>20, serving>>20, verdict)}
}

// specOutputGrowth is what the output buffers grow to once speculative
// decoding runs, beyond the one row per sequence reserved at load
// (llama_context::output_reserve reallocates, silently, for a batch
// with more outputs): the target's logits for every drafted token of
// every slot and, with an MTP head, the hidden state of every batch
// token (embeddings_nextn, unmasked); the MTP draft's own hidden states
// and the two rows of floats and one of tokens per output that its
// backend samplers keep (backend_sampling, on by default).
func specOutputGrowth(m *arch.Model, c graph.Context, p Profile, cpu Device) []Buffer {
	s := p.Spec
	if s.nMax() == 0 || p.loadOnly {
		return nil
	}
	seqs := int64(max(c.NSeq, 1))
	vocab, embd := int64(m.NVocab), int64(m.NEmbd)
	load := 4 * vocab * seqs
	target := 4 * vocab * int64(c.NOutputsMax)
	var draft int64
	if s.MTP() {
		target += 4 * embd * int64(c.NBatch)
		draft = 4*(vocab+embd)*seqs + 4*2*vocab*seqs + 4*(1+vocab)*seqs
	}
	var out []Buffer
	if grow := target - load; grow > 0 {
		note := fmt.Sprintf("the target's output buffer at %d outputs (each slot's token and its %d drafted ones)", c.NOutputsMax, s.nMax())
		if s.MTP() {
			note += fmt.Sprintf(", and the MTP head's input, %d hidden states", c.NBatch)
		}
		out = append(out, Buffer{Device: cpu.Name, BufferType: cpu.Name, Kind: KindOutputGrowth, Bytes: grow, Note: note})
	}
	if grow := draft - load; grow > 0 {
		out = append(out, Buffer{Device: cpu.Name, BufferType: cpu.Name, Kind: KindOutputGrowth, Model: ModelDraft, Bytes: grow,
			Note: "the MTP draft's output buffer with its hidden states and its backend samplers' logits, probabilities and candidates"})
	}
	return out
}
