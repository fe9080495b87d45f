package llamaflags

import (
	"flag"
	"os"
	"testing"
)

var updateDoc = flag.Bool("update-doc", false, "rewrite docs/llama-flags.md")

// TestDoc holds docs/llama-flags.md to the tables.
func TestDoc(t *testing.T) {
	got, err := Doc()
	if err != nil {
		t.Fatal(err)
	}
	const path = "../docs/llama-flags.md"
	if *updateDoc {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Errorf("%s is not what the tables give; run go test ./llamaflags -run TestDoc -update-doc", path)
	}
}
