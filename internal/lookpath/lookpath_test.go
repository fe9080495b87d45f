package lookpath

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestRelativeEntriesRefused: a program planted in a directory that PATH
// names relatively (or by an empty entry) is refused, and the same
// program in an absolute entry is found.
func TestRelativeEntriesRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(dir, "bin", "planted-tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\necho planted\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, path := range []string{"bin", "./bin", "bin:/usr/bin"} {
		t.Setenv("PATH", path)
		if p, err := LookPath("planted-tool"); !errors.Is(err, ErrRelative) {
			t.Errorf("PATH=%s: %q, %v; want the relative entry refused", path, p, err)
		}
	}
	t.Chdir(filepath.Join(dir, "bin"))
	t.Setenv("PATH", ":/usr/bin") // an empty entry is the working directory
	if p, err := LookPath("planted-tool"); !errors.Is(err, ErrRelative) {
		t.Errorf("PATH with an empty entry: %q, %v; want it refused", p, err)
	}
	t.Setenv("PATH", filepath.Join(dir, "bin"))
	if p, err := LookPath("planted-tool"); err != nil || p != tool {
		t.Errorf("absolute entry: %q, %v; want %s", p, err, tool)
	}
}
