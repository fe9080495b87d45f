package cli

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// modelsDir names files as llama-server's router does: without .gguf, a
// split model by its first shard, projectors left out.
func TestModelsDir(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{
		"Qwen3-0.6B-Q4_K_M.gguf",
		"big-00001-of-00002.gguf", "big-00002-of-00002.gguf",
		"mmproj-Qwen3-F16.gguf",
		"notes.txt",
	} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.gguf"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := modelsDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := slices.Sorted(maps.Keys(got))
	if want := []string{"Qwen3-0.6B-Q4_K_M", "big-00001-of-00002"}; !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	if got["big-00001-of-00002"] != filepath.Join(dir, "big-00001-of-00002.gguf") {
		t.Errorf("path %q", got["big-00001-of-00002"])
	}
	if _, err := modelsDir(t.TempDir()); err == nil {
		t.Error("an empty directory was accepted")
	}
}
