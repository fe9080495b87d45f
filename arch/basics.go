package arch

import (
	"fmt"
	"slices"

	"github.com/headroom-llm/headroom/gguf"
)

// Basics are the facts every llama.cpp architecture states under its own
// key prefix, whatever its graph: enough to size the output buffer
// llama-server adds, to bound a search over layers and context, and to
// warn past the trained context. They are what headroom reads of an
// architecture it does not model, whose memory the user's own llama.cpp
// projects instead.
type Basics struct {
	Arch string
	// NLayer is block_count: the layers -ngl counts, besides the output.
	NLayer int
	NEmbd  int
	// CtxTrain is context_length, 0 when the file does not say.
	CtxTrain int
	// NVocab is the tokenizer's size, the width of a logits row.
	NVocab int
}

// BasicsOf reads a header's Basics. The architecture need not be one
// headroom models; a header missing block_count or with one out of range
// is refused as llama.cpp's loader refuses it.
func BasicsOf(m *gguf.Model) (Basics, error) {
	name := m.Architecture()
	if name == "" {
		return Basics{}, &Incompatible{Reason: "the file has no general.architecture"}
	}
	h := hparams{m: m, prefix: name + "."}
	b := Basics{Arch: name}
	var err error
	if b.NLayer, err = h.need("block_count"); err != nil {
		return Basics{}, err
	}
	if b.NLayer <= 0 || b.NLayer > 4096 {
		return Basics{}, &Incompatible{Reason: fmt.Sprintf("%sblock_count %d is out of range (1 to 4096)", h.prefix, b.NLayer)}
	}
	if b.NEmbd, err = h.opt("embedding_length", 0); err != nil {
		return Basics{}, err
	}
	if b.CtxTrain, err = h.opt("context_length", 0); err != nil {
		return Basics{}, err
	}
	b.NVocab = vocabSize(m, h)
	return b, nil
}

// Modeled reports whether headroom replays the architecture's memory
// itself (a family of its own), rather than asking llama.cpp.
func Modeled(name string) bool {
	_, ok := families[name]
	return ok
}

// Refused are llama.cpp architectures headroom answers for neither by its
// own accounting nor through llama.cpp's projection, with the reason:
// llama-server does not serve them as chat or completion models.
var refused = map[string]string{
	"nomic-bert-moe":   "an embedding encoder whose graph headroom does not replay yet (bert and nomic-bert are modeled)",
	"neo-bert":         "an embedding encoder (see nomic-bert-moe)",
	"jina-bert-v2":     "an embedding encoder (see nomic-bert-moe)",
	"jina-bert-v3":     "an embedding encoder (see nomic-bert-moe)",
	"modern-bert":      "an embedding encoder (see nomic-bert-moe)",
	"eurobert":         "an embedding encoder (see nomic-bert-moe)",
	"gemma-embedding":  "an embedding model (see nomic-bert-moe)",
	"llama-embed":      "an embedding model (see nomic-bert-moe)",
	"t5":               "an encoder-decoder: llama-server has no slots for its encoder pass",
	"t5encoder":        "an encoder alone: it generates no tokens",
	"wavtokenizer-dec": "an audio decoder (text-to-speech vocoder), not a language model",
	"qwen3tts":         "a text-to-speech model",
	"pockettts":        "a text-to-speech model",
	"clip":             "a projector's encoder, loaded with --mmproj beside a model, never alone",
	"dream":            "a diffusion language model: llama.cpp runs it with llama-diffusion-cli, not llama-server",
	"llada":            "a diffusion language model (see dream)",
	"llada-moe":        "a diffusion language model (see dream)",
	"rnd1":             "a diffusion language model (see dream)",
	"eagle3":           "a speculative-decoding head, loaded beside its target model, never served alone",
	"dflash":           "a speculative-decoding head (see eagle3)",
	"gemma4-assistant": "Gemma 4's drafting head (see eagle3)",
}

// RefusedReason says why headroom will not plan an architecture of
// llama.cpp's, or "" when it plans it (modeled or through llama.cpp's
// projection).
func RefusedReason(name string) string { return refused[name] }

// RefusedNames lists the refused architectures, sorted.
func RefusedNames() []string {
	var out []string
	for n := range refused {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
