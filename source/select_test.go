package source

import (
	"slices"
	"strings"
	"testing"
)

func listOf(paths ...string) *listing {
	l := &listing{Repo: "o/r", Commit: strings.Repeat("c", 40)}
	for _, p := range paths {
		l.Files = append(l.Files, listedFile{Path: p, Size: 1})
	}
	return l
}

func TestPickFiles(t *testing.T) {
	tests := []struct {
		name       string
		files      []string
		ref        Ref
		wantShards []string
		wantMMProj string
		wantErr    string
	}{
		{
			name:       "default prefers Q4_K_M",
			files:      []string{"README.md", "m-Q2_K.gguf", "m-Q8_0.gguf", "m-Q4_K_M.gguf", "mmproj-m-f16.gguf"},
			wantShards: []string{"m-Q4_K_M.gguf"}, wantMMProj: "mmproj-m-f16.gguf",
		},
		{
			name:       "default falls back to Q8_0",
			files:      []string{"m-Q2_K.gguf", "m-Q8_0.gguf"},
			wantShards: []string{"m-Q8_0.gguf"},
		},
		{
			name:       "default falls back to the first model, skipping sidecars",
			files:      []string{"imatrix.gguf", "mmproj-F16.gguf", "m-IQ2_XS.gguf", "m-F16.gguf"},
			wantShards: []string{"m-IQ2_XS.gguf"}, wantMMProj: "mmproj-F16.gguf",
		},
		{
			name:       "tag is case-insensitive and picks the first shard's split",
			files:      []string{"Q4_K_M/m-Q4_K_M-00002-of-00002.gguf", "Q4_K_M/m-Q4_K_M-00001-of-00002.gguf", "m-Q8_0.gguf"},
			ref:        Ref{Tag: "q4_k_m"},
			wantShards: []string{"Q4_K_M/m-Q4_K_M-00001-of-00002.gguf", "Q4_K_M/m-Q4_K_M-00002-of-00002.gguf"},
		},
		{
			name:       "tag followed by '.' or '-' only",
			files:      []string{"m-Q4_K_M.gguf", "m-Q4_K_S.gguf"},
			ref:        Ref{Tag: "Q4_K"},
			wantErr:    `no GGUF model file in o/r@cccccccccccc matches quant tag "Q4_K"; available quant tags: Q4_K_M, Q4_K_S`,
			wantShards: nil,
		},
		{
			name:    "ambiguous tag",
			files:   []string{"m-BF16.gguf", "m-F16.gguf"},
			ref:     Ref{Tag: "F16", Revision: "main"},
			wantErr: `quant tag "F16" is ambiguous in o/r@main: it matches m-BF16.gguf, m-F16.gguf (llama.cpp's -hf would take m-BF16.gguf)`,
		},
		{
			name:    "mmproj never counts as a model",
			files:   []string{"mmproj-m-Q8_0.gguf"},
			ref:     Ref{Tag: "Q8_0"},
			wantErr: "has no GGUF model files (found: mmproj-m-Q8_0.gguf)",
		},
		{
			name:       "named file, case-insensitively, gathers its shards",
			files:      []string{"a/m-00001-of-00002.gguf", "a/m-00002-of-00002.gguf"},
			ref:        Ref{File: "A/M-00002-OF-00002.gguf"},
			wantShards: []string{"a/m-00001-of-00002.gguf", "a/m-00002-of-00002.gguf"},
		},
		{
			name:    "missing shard",
			files:   []string{"m-00001-of-00003.gguf", "m-00003-of-00003.gguf"},
			ref:     Ref{File: "m-00001-of-00003.gguf"},
			wantErr: "split into 3 shards, but shard 2, m-00002-of-00003.gguf, is not in",
		},
		{
			name:       "projector closest in bits, nearest directory",
			files:      []string{"mmproj-F32.gguf", "q/mmproj-F16.gguf", "q/mmproj-Q8_0.gguf", "q/deep/mmproj-Q4_0.gguf", "q/m-Q4_K_M.gguf"},
			wantShards: []string{"q/m-Q4_K_M.gguf"}, wantMMProj: "q/mmproj-Q8_0.gguf",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shards, mmproj, err := pickFiles(listOf(tt.files...), tt.ref)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range shards {
				got = append(got, s.Path)
			}
			if !slices.Equal(got, tt.wantShards) {
				t.Errorf("shards %q, want %q", got, tt.wantShards)
			}
			gotProj := ""
			if mmproj != nil {
				gotProj = mmproj.Path
			}
			if gotProj != tt.wantMMProj {
				t.Errorf("mmproj %q, want %q", gotProj, tt.wantMMProj)
			}
		})
	}
}

func TestNameTag(t *testing.T) {
	tests := []struct {
		path string
		tag  string
		bits int
	}{
		{"Llama-3.2-1B-Instruct-Q4_K_M.gguf", "Q4_K_M", 4},
		{"dir/model.q8_0.gguf", "Q8_0", 8},
		{"m-UD-Q4_K_XL-00001-of-00003.gguf", "Q4_K_XL", 4},
		{"mmproj-model-f16.gguf", "F16", 16},
		{"model-BF16.gguf", "BF16", 16},
		{"model.gguf", "", 0},
		{"model.bin", "", 0},
	}
	for _, tt := range tests {
		if got := nameTag(tt.path); got != tt.tag {
			t.Errorf("nameTag(%q) = %q, want %q", tt.path, got, tt.tag)
		}
		if got := quantBits(tt.path); got != tt.bits {
			t.Errorf("quantBits(%q) = %d, want %d", tt.path, got, tt.bits)
		}
	}
}
