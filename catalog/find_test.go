package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ENTRY/QUANT is parsed here and nowhere else: a variant (its
// quantization in any case), nothing for what is not one, an error that
// lists the quantizations for an entry without the one asked; FindRef
// leaves a file named like a variant to be a file.
func TestFind(t *testing.T) {
	cat, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	if err := os.MkdirAll("qwen3-8b", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("qwen3-8b", "Q8_0"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ref           string
		find, findRef string // the variant Find and FindRef give, "" for none
		err           string
	}{
		{ref: "qwen3-8b/Q4_K_M", find: "Q4_K_M", findRef: "Q4_K_M"},
		{ref: "qwen3-8b/q4_k_m", find: "Q4_K_M", findRef: "Q4_K_M"},
		{ref: "qwen3-8b/Q8_0", find: "Q8_0"}, // a file here
		{ref: "nope/Q4_K_M"},
		{ref: "hf:Qwen/Qwen3-8B-GGUF:Q4_K_M"},
		{ref: "qwen3-8b/Q4_K_M/x"},
		{ref: "model.gguf"},
		{ref: "qwen3-8b/Q9_K", err: "the catalog has no Q9_K variant of qwen3-8b (did you mean qwen3-8b/Q6_K? it has "},
	} {
		for _, f := range []struct {
			name string
			find func(string) (*Entry, *Variant, error)
			want string
		}{{"Find", cat.Find, tc.find}, {"FindRef", cat.FindRef, tc.findRef}} {
			e, v, err := f.find(tc.ref)
			got := ""
			if v != nil {
				got = v.Quant
			}
			if got != f.want || (e == nil) != (v == nil) {
				t.Errorf("%s(%q) = %q, want %q", f.name, tc.ref, got, f.want)
			}
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("%s(%q): error %v, want %q", f.name, tc.ref, err, tc.err)
			}
		}
	}
}
