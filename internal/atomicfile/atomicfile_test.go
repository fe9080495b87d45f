package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a", "b", "f.json")
	for _, want := range []string{"first", "second, longer than the first", "3"} {
		if err := WriteFile(path, []byte(want)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Fatalf("read %q (%v), want %q", got, err, want)
		}
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Errorf("the directory holds %d entries, want the file alone", len(ents))
	}
	// A path that is a directory cannot be replaced: the error comes
	// back and no temporary file stays.
	if err := WriteFile(filepath.Join(dir, "a", "b"), []byte("x")); err == nil {
		t.Error("replacing a directory succeeded")
	}
	ents, _ = os.ReadDir(filepath.Join(dir, "a"))
	if len(ents) != 1 {
		t.Errorf("a failed write left %d entries beside the directory", len(ents)-1)
	}
}
