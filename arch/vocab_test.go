package arch

import (
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

func vocabModel(t *testing.T, kind string, tokens []string, extra ...gguf.KV) *gguf.Model {
	t.Helper()
	kv := []gguf.KV{
		{Key: "general.architecture", Value: gguf.StringValue("llama")},
		{Key: "tokenizer.ggml.model", Value: gguf.StringValue(kind)},
		{Key: "tokenizer.ggml.tokens", Value: gguf.StringsValue(tokens)},
		{Key: "tokenizer.ggml.bos_token_id", Value: gguf.Uint32Value(1)},
		{Key: "tokenizer.ggml.eos_token_id", Value: gguf.Uint32Value(2)},
	}
	m, err := gguf.NewModel(&gguf.File{Version: 3, Alignment: 32, Metadata: append(kv, extra...)})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func words(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
	}
	return out
}

func TestDraftCompatible(t *testing.T) {
	base := words(1000, "")
	// The first five ids (control tokens) are not compared.
	early := append([]string{"<s0>", "<s1>", "<s2>", "<s3>", "<s4>"}, base[5:]...)
	changed := append([]string{}, base...)
	changed[700] = "different"
	for _, tt := range []struct {
		name  string
		draft *gguf.Model
		want  string // "" for compatible
	}{
		{"same", vocabModel(t, "gpt2", base), ""},
		{"differs below id 5", vocabModel(t, "gpt2", early), ""},
		{"128 more tokens", vocabModel(t, "gpt2", append(append([]string{}, base...), words(128, "extra")...)), ""},
		{"129 more tokens", vocabModel(t, "gpt2", append(append([]string{}, base...), words(129, "extra")...)), "more than the 128 llama.cpp allows"},
		{"other tokenizer", vocabModel(t, "llama", base), `its tokenizer is "llama", the target's "gpt2"`},
		{"token text", vocabModel(t, "gpt2", changed), `token 700 is "different"`},
		{"adds a BOS", vocabModel(t, "gpt2", base, gguf.KV{Key: "tokenizer.ggml.add_bos_token", Value: gguf.BoolValue(true)}), "BOS"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := DraftCompatible(vocabModel(t, "gpt2", base), tt.draft)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}
