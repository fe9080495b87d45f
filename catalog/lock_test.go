package catalog

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/source/hubtest"
	"github.com/headroom-llm/headroom/synth"
)

// publish puts the lock catalog's files on a Hub stand-in: two
// quantizations of Qwen3-0.6B in one repository, Gemma-3-1B with a
// projector in another. The listed sha256 of the GGUFs are stand-ins
// (the lock reads headers only and never hashes a file).
func publish(t *testing.T) *hubtest.Hub {
	t.Helper()
	h := hubtest.New(t)
	h.AddGGUF(t, "test/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf", "qwen3-0.6b", synth.Q8_0, false)
	h.AddGGUF(t, "test/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q4_K_M.gguf", "qwen3-0.6b", synth.Q4_K_M, false)
	h.AddGGUF(t, "test/gemma-3-1b-it-GGUF", "gemma-3-1b-it-Q4_K_M.gguf", "gemma-3-1b", synth.Q4_K_M, false)
	mmproj := make([]byte, 1<<20)
	copy(mmproj, "GGUF")
	h.Add(t, "test/gemma-3-1b-it-GGUF", "mmproj-F16.gguf", mmproj, 4)
	return h
}

func mmprojSHA(h *hubtest.Hub) string {
	_, sha := h.Listed("test/gemma-3-1b-it-GGUF", "mmproj-F16.gguf")
	return sha
}

// lockCatalog is a small catalog: two entries whose variants share a
// file (the draft's and its own), one entry with a projector.
func lockCatalog(t *testing.T) *Catalog {
	t.Helper()
	c, err := Parse([]byte(`{"licenses": {"apache-2.0": "Apache"}, "entries": [
	 {"id": "qwen3-0.6b", "name": "Qwen3 0.6B", "family": "qwen3", "class": {"kind": "dense", "params_b": 0.6}, "config": "Qwen/Qwen3-0.6B config.json",
	  "shape": {"base": "qwen3-0.6b"}, "ctx_trained": 40960, "capabilities": [], "license": "apache-2.0", "quality": null,
	  "variants": [{"quant": "Q8_0", "ref": "hf:test/Qwen3-0.6B-GGUF:Q8_0"}, {"quant": "Q4_K_M", "ref": "hf:test/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q4_K_M.gguf"}]},
	 {"id": "qwen3-0.6b-draftpack", "name": "Qwen3 0.6B (same file by name)", "family": "qwen3", "class": {"kind": "dense", "params_b": 0.6}, "config": "Qwen/Qwen3-0.6B config.json",
	  "shape": {"base": "qwen3-0.6b"}, "ctx_trained": 40960, "capabilities": [], "license": "apache-2.0", "quality": null,
	  "variants": [{"quant": "Q8_0", "ref": "hf:test/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf"}],
	  "draft": {"entry": "qwen3-0.6b", "quant": "Q8_0", "reviewed": "same tokenizer"}},
	 {"id": "gemma-3-1b-it", "name": "Gemma 3 1B", "family": "gemma-3", "class": {"kind": "dense", "params_b": 1.0}, "config": "google/gemma-3-1b-it config.json",
	  "shape": {"base": "gemma-3-1b"}, "ctx_trained": 32768, "capabilities": ["vision"], "license": "apache-2.0", "quality": null,
	  "variants": [{"quant": "Q4_K_M", "ref": "hf:test/gemma-3-1b-it-GGUF:Q4_K_M"}],
	  "projector": {"note": "test"}}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLockAgainstFakeHub(t *testing.T) {
	h := publish(t)
	cat := lockCatalog(t)

	l, err := Lock(context.Background(), h.Client(t), cat.Entries)
	if err != nil {
		t.Fatal(err)
	}
	qcommit := h.Commit("test/Qwen3-0.6B-GGUF")

	// Identities: every pinned value is the Hub's.
	if len(l.Packages) != 3 || len(l.Variants) != 4 {
		t.Fatalf("%d packages for %d variants, want 3 for 4: %v", len(l.Packages), len(l.Variants), l.PackageIDs())
	}
	q8 := l.Variants["qwen3-0.6b/Q8_0"]
	wantID := PackageID("test/Qwen3-0.6B-GGUF", qcommit, "Qwen3-0.6B-Q8_0.gguf")
	if q8 == nil || q8.Package != wantID {
		t.Fatalf("qwen3-0.6b/Q8_0 is %+v, want package %s", q8, wantID)
	}
	p := l.Packages[wantID]
	size, sha := h.Listed("test/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf")
	if p.Commit != qcommit || len(p.Files) != 1 || p.Files[0].Size != size || p.Files[0].SHA256 != sha {
		t.Errorf("package %+v does not carry the Hub's commit, size and sha256 (%s %d %s)", p, qcommit, size, sha)
	}
	// Sharing: a tag reference and a file reference to the same file.
	if other := l.Variants["qwen3-0.6b-draftpack/Q8_0"]; other == nil || other.Package != wantID {
		t.Errorf("the file reference to the same file has package %+v, want the shared %s", other, wantID)
	}
	// The projector comes from the listing too.
	gv := l.Variants["gemma-3-1b-it/Q4_K_M"]
	if gv == nil || gv.Projector == nil || gv.Projector.Name != "mmproj-F16.gguf" || gv.Projector.SHA256 != mmprojSHA(h) {
		t.Errorf("gemma's projector is %+v", gv)
	}

	// Round trip through the file format.
	var buf bytes.Buffer
	if err := l.Write(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ParseLock(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}

	// Locked entries plan from the lock, as inspected, with no network.
	h.Close()
	for _, e := range cat.Entries {
		for _, v := range e.Variants {
			m, prov, size, err := cat.Model(&e, v, back)
			if err != nil {
				t.Fatalf("%s %s: %v", e.ID, v.Quant, err)
			}
			if prov != ProvenanceInspected {
				t.Errorf("%s %s: provenance %s, want inspected", e.ID, v.Quant, prov)
			}
			pkg, _ := back.Lookup(e.ID, v)
			if size != pkg.Size() || m.NLayer == 0 {
				t.Errorf("%s %s: size %d, the lock says %d", e.ID, v.Quant, size, pkg.Size())
			}
			s, _ := e.Shape.Resolve()
			dm, err := DeriveModel(s, synth.Quant(v.Quant))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := len(m.Tensors), len(dm.Tensors); got != want {
				t.Errorf("%s %s: %d tensors from the lock, %d derived", e.ID, v.Quant, got, want)
			}
		}
	}
	rows, err := Recommend(cat, back, machine_(t, "rtx-4090"), Options{Goal: GoalBalanced})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Provenance != ProvenanceInspected || r.SizeSource != "hub" || r.Commit == "" || r.Verdict != "fits" || r.Plan.Source != "search" {
			t.Errorf("%s %s: %s, size %s, commit %q, %s, plan %+v", r.Entry, r.Quant, r.Provenance, r.SizeSource, r.Commit, r.Verdict, r.Plan)
		}
	}
	// A changed reference makes the lock entry stale: derived again.
	v := cat.Entries[0].Variants[0]
	v.Ref = "hf:test/Other-GGUF:Q8_0"
	if _, prov, _, _ := cat.Model(&cat.Entries[0], v, back); prov != ProvenanceDerived {
		t.Errorf("a variant whose reference changed is %s, want derived", prov)
	}
}

func TestLockFailsClearly(t *testing.T) {
	h := hubtest.New(t)
	cat := lockCatalog(t)
	_, err := Lock(context.Background(), h.Client(t), cat.Entries)
	if err == nil || !strings.Contains(err.Error(), "qwen3-0.6b/Q8_0") || !strings.Contains(err.Error(), "hf:test/Qwen3-0.6B-GGUF:Q8_0") {
		t.Fatalf("got %v, want an error naming the variant and its reference", err)
	}
}

func TestParseLockRejects(t *testing.T) {
	for _, tc := range []struct{ name, data, want string }{
		{"version", `{"version": 2, "packages": {}, "variants": {}}`, "version"},
		{"dangling variant", `{"version": 1, "packages": {}, "variants": {"a/Q8_0": {"ref": "hf:a/b:Q8_0", "package": "x"}}}`, "not in the lock"},
		{"no commit", `{"version": 1, "packages": {"a/b@main/f.gguf": {"repo": "a/b", "commit": "main", "files": [{"name": "f.gguf", "size": 1}], "inputs": {"files": []}}}, "variants": {}}`, "40-hex commit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseLock([]byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestLockSeesChangedUpstream republishes one file under the same name: the
// next lock pins a new commit and sha256 for it (a new package identity),
// and the untouched repository keeps its identity.
func TestLockSeesChangedUpstream(t *testing.T) {
	h := publish(t)
	cat := lockCatalog(t)
	before, err := Lock(context.Background(), h.Client(t), cat.Entries)
	if err != nil {
		t.Fatal(err)
	}
	// The publisher re-quantizes the Q8_0 file with another recipe and
	// uploads it under the same name.
	h.AddGGUF(t, "test/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf", "qwen3-0.6b", synth.F16, false)
	after, err := Lock(context.Background(), h.Client(t), cat.Entries)
	if err != nil {
		t.Fatal(err)
	}
	b, a := before.Variants["qwen3-0.6b/Q8_0"], after.Variants["qwen3-0.6b/Q8_0"]
	if b == nil || a == nil || a.Package == b.Package {
		t.Fatalf("the republished file kept its identity: before %+v, after %+v", b, a)
	}
	pb, pa := before.Packages[b.Package], after.Packages[a.Package]
	if pa.Files[0].SHA256 == pb.Files[0].SHA256 || pa.Commit == pb.Commit {
		t.Errorf("new identity %s carries the old sha256 or commit", a.Package)
	}
	if _, still := after.Packages[b.Package]; still {
		t.Errorf("the old identity %s is still in the new lock", b.Package)
	}
	if before.Variants["gemma-3-1b-it/Q4_K_M"].Package != after.Variants["gemma-3-1b-it/Q4_K_M"].Package {
		t.Error("an untouched repository changed identity")
	}
	// The planner inputs follow the new file: F16 weights are larger.
	if pa.Size() <= pb.Size() {
		t.Errorf("new package %d bytes, old %d; want the F16 file larger", pa.Size(), pb.Size())
	}
}
