package arch

import (
	"fmt"

	"github.com/headroom-llm/headroom/gguf"
)

// llama.cpp refuses a speculative-decoding draft whose vocabulary differs
// from the target's (common_speculative_are_compatible in
// common/speculative.cpp): the tokenizer type must match, so must whether
// a BOS and an EOS token are added and, when added, their ids; the two
// vocabularies may differ in size by at most 128 tokens; and every token
// from id 5 up to the smaller size must have the same text. llama-server
// stops at load when they differ, so a plan with such a draft would never
// run.
const (
	draftVocabMaxDiff    = 128 // SPEC_VOCAB_MAX_SIZE_DIFFERENCE
	draftVocabCheckStart = 5   // SPEC_VOCAB_CHECK_START_TOKEN_ID
)

// vocab is what the compatibility check reads of a header.
type vocab struct {
	kind           string // tokenizer.ggml.model
	addBOS, addEOS bool
	bos, eos       int64 // -1 when not declared
	tokens         *gguf.ArrayValue
}

func readVocab(m *gguf.Model) (vocab, error) {
	v := vocab{bos: -1, eos: -1}
	if s, ok := m.Lookup("tokenizer.ggml.model"); ok {
		v.kind, _ = s.AsString()
	}
	if v.kind == "" {
		return v, fmt.Errorf("the header declares no tokenizer (tokenizer.ggml.model)")
	}
	t, ok := m.Lookup("tokenizer.ggml.tokens")
	if !ok {
		return v, fmt.Errorf("the header has no token list (tokenizer.ggml.tokens)")
	}
	if v.tokens, ok = t.AsArray(); !ok || v.tokens.Elem() != gguf.String {
		return v, fmt.Errorf("tokenizer.ggml.tokens is not an array of strings")
	}
	// llama.cpp's defaults by tokenizer type, which the header's own
	// add_bos_token and add_eos_token override: SentencePiece and
	// WordPiece add a BOS, Unigram (T5) adds an EOS.
	v.addBOS = v.kind == "llama" || v.kind == "bert"
	v.addEOS = v.kind == "t5"
	if b, ok := m.Lookup("tokenizer.ggml.add_bos_token"); ok {
		v.addBOS, _ = b.AsBool()
	}
	if b, ok := m.Lookup("tokenizer.ggml.add_eos_token"); ok {
		v.addEOS, _ = b.AsBool()
	}
	if id, ok := m.Lookup("tokenizer.ggml.bos_token_id"); ok {
		v.bos, _ = id.AsInt()
	}
	if id, ok := m.Lookup("tokenizer.ggml.eos_token_id"); ok {
		v.eos, _ = id.AsInt()
	}
	return v, nil
}

// DraftCompatible returns an error saying how the draft's vocabulary
// differs from the target's where llama.cpp would refuse the pair for
// speculative decoding, and nil where it would accept it.
func DraftCompatible(target, draft *gguf.Model) error {
	tv, err := readVocab(target)
	if err != nil {
		return fmt.Errorf("the target's vocabulary cannot be compared: %w", err)
	}
	dv, err := readVocab(draft)
	if err != nil {
		return fmt.Errorf("the draft's vocabulary cannot be compared: %w", err)
	}
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("llama.cpp refuses this draft: "+format, args...)
	}
	switch {
	case tv.kind != dv.kind:
		return refuse("its tokenizer is %q, the target's %q", dv.kind, tv.kind)
	case tv.addBOS != dv.addBOS || tv.addBOS && tv.bos != dv.bos:
		return refuse("it adds a BOS token %v (id %d), the target %v (id %d)", dv.addBOS, dv.bos, tv.addBOS, tv.bos)
	case tv.addEOS != dv.addEOS || tv.addEOS && tv.eos != dv.eos:
		return refuse("it adds an EOS token %v (id %d), the target %v (id %d)", dv.addEOS, dv.eos, tv.addEOS, tv.eos)
	}
	nt, nd := tv.tokens.Len(), dv.tokens.Len()
	if diff := max(nt-nd, nd-nt); diff > draftVocabMaxDiff {
		return refuse("its vocabulary has %d tokens, the target's %d: %d apart, more than the %d llama.cpp allows", nd, nt, diff, draftVocabMaxDiff)
	}
	for i := draftVocabCheckStart; i < min(nt, nd); i++ {
		a, _ := tv.tokens.Index(i).AsString()
		b, _ := dv.tokens.Index(i).AsString()
		if a != b {
			return refuse("token %d is %q in the draft, %q in the target", i, b, a)
		}
	}
	return nil
}
