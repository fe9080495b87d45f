package source

import (
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

func TestFileTypeTag(t *testing.T) {
	for _, tt := range []struct {
		name string
		kv   []gguf.KV
		want string
	}{
		{"Q4_K_M", []gguf.KV{{Key: "general.file_type", Value: gguf.Uint32Value(15)}}, "Q4_K_M"},
		{"MXFP4", []gguf.KV{{Key: "general.file_type", Value: gguf.Uint32Value(38)}}, "MXFP4_MOE"},
		{"int32", []gguf.KV{{Key: "general.file_type", Value: gguf.Int32Value(7)}}, "Q8_0"},
		{"removed Q4_0_4_4", []gguf.KV{{Key: "general.file_type", Value: gguf.Uint32Value(33)}}, ""},
		{"negative", []gguf.KV{{Key: "general.file_type", Value: gguf.Int32Value(-1)}}, ""},
		{"absent", nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := gguf.NewModel(&gguf.File{Version: 3, Alignment: 32, Metadata: tt.kv})
			if err != nil {
				t.Fatal(err)
			}
			if got := FileTypeTag(m); got != tt.want {
				t.Errorf("FileTypeTag = %q, want %q", got, tt.want)
			}
		})
	}
}
