package main

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/headroom-llm/headroom/conformance"
	"github.com/headroom-llm/headroom/synth"
)

// synthgen's digest must be the one conformance.CheckSynth recomputes, or
// every golden file would look stale.
func TestRunWritesFilesWithTheConformanceDigest(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run(dir, []string{"tinyllama-1.1b:Q8_0"}, &out); err != nil {
		t.Fatal(err)
	}
	var got map[string]entry
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	e, ok := got["tinyllama-1.1b:Q8_0"]
	if !ok {
		t.Fatalf("no entry in %s", out.String())
	}
	s, _ := synth.Lookup("tinyllama-1.1b")
	b, err := synth.Build(s, synth.Q8_0)
	if err != nil {
		t.Fatal(err)
	}
	digest, size, err := conformance.HeaderDigest(b)
	if err != nil {
		t.Fatal(err)
	}
	if e.HeaderSHA256 != digest || e.Size != size || e.Arch != "llama" || e.Params != 1100048384 {
		t.Errorf("entry %+v, want digest %s size %d", e, digest, size)
	}
	st, err := os.Stat(e.Path)
	if err != nil || st.Size() != size {
		t.Fatalf("file %s: %v, size %d", e.Path, err, st.Size())
	}

	// A second run finds the file current and leaves it alone.
	if err := os.Chtimes(e.Path, st.ModTime().Add(-3600e9), st.ModTime().Add(-3600e9)); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(e.Path)
	if err := run(dir, []string{"tinyllama-1.1b:Q8_0"}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(e.Path)
	if !after.ModTime().Equal(before.ModTime()) {
		t.Error("an up-to-date file was rewritten")
	}
}

func TestRunRejectsBadSpecs(t *testing.T) {
	for _, spec := range []string{"tinyllama-1.1b", "no-such-shape:Q8_0", "tinyllama-1.1b:Q9_9"} {
		if err := run(t.TempDir(), []string{spec}, &bytes.Buffer{}); err == nil {
			t.Errorf("%q accepted", spec)
		}
	}
}
