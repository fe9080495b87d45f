//go:build unix

package gguf

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// WriteFile refuses a path that is not a regular file, and leaves it as
// it was: a FIFO stays a FIFO, a link stays a link to its target.
func TestWriteFileRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	b := NewBuilder()
	b.Set("general.architecture", StringValue("llama"))
	for _, path := range []string{fifo, link, dir} {
		before, _ := os.Lstat(path)
		err := b.WriteFile(path)
		after, serr := os.Lstat(path)
		if err == nil || !strings.Contains(err.Error(), "not a regular file") || serr != nil || after.Mode() != before.Mode() {
			t.Errorf("%s: %v; now %v (%v)", path, err, after, serr)
		}
	}
	if data, _ := os.ReadFile(target); string(data) != "keep" {
		t.Errorf("the link's target was written: %q", data)
	}
	if err := b.WriteFile(filepath.Join(dir, "new.gguf")); err != nil {
		t.Errorf("a new file: %v", err)
	}
}
