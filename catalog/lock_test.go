package catalog

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/internal/synth"
	"github.com/headroom-llm/headroom/source"
)

// hub is a fake Hugging Face Hub: the revision API and /resolve/ serving
// whole files with range support. Files are GGUF headers made by synth
// (sparse: the data region reads as zeros).
type hub struct {
	srv   *httptest.Server
	mu    sync.Mutex
	repos map[string]*hubRepo
	api   int
}

type hubRepo struct {
	commit string
	files  map[string]hubFile
	order  []string
}

type hubFile struct {
	header []byte // the header; the rest of the file is zeros
	size   int64
	sha    string
}

func newHub(t *testing.T) *hub {
	h := &hub{repos: map[string]*hubRepo{}}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

// add publishes a GGUF (and optionally more files) in repo.
func (h *hub) add(t *testing.T, repo, name string, s synth.Shape, q synth.Quant) {
	t.Helper()
	g, err := DeriveModel(s, q) // the same tensors synth writes, with a short tokenizer
	if err != nil {
		t.Fatal(err)
	}
	b := gguf.NewBuilder()
	for _, kv := range g.Files[0].Metadata {
		b.Set(kv.Key, kv.Value)
	}
	for _, ti := range g.Files[0].Tensors {
		if err := b.AddTensor(ti.Name, ti.Type, ti.Shape, nil); err != nil {
			t.Fatal(err)
		}
	}
	var hdr bytes.Buffer
	if err := b.WriteHeader(&hdr); err != nil {
		t.Fatal(err)
	}
	lay, err := b.Layout()
	if err != nil {
		t.Fatal(err)
	}
	h.addRaw(repo, name, hdr.Bytes(), lay.Size)
}

func (h *hub) addRaw(repo, name string, header []byte, size int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.repos[repo]
	if r == nil {
		r = &hubRepo{files: map[string]hubFile{}}
		h.repos[repo] = r
	}
	// A stand-in for the LFS oid: the sha256 of the header and the size
	// (hashing gigabytes of zeros would only slow the test).
	sum := sha256.Sum256(append(append([]byte{}, header...), []byte(fmt.Sprint(size))...))
	if _, ok := r.files[name]; !ok {
		r.order = append(r.order, name)
	}
	r.files[name] = hubFile{header: header, size: size, sha: hex.EncodeToString(sum[:])}
	c := sha1.New()
	for _, n := range r.order {
		c.Write([]byte(n + r.files[n].sha))
	}
	r.commit = hex.EncodeToString(c.Sum(nil))
}

func (h *hub) serve(w http.ResponseWriter, req *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rest, ok := strings.CutPrefix(req.URL.Path, "/api/models/"); ok {
		h.api++
		parts := strings.SplitN(rest, "/", 4)
		r := h.repos[parts[0]+"/"+parts[1]]
		if len(parts) != 4 || r == nil || (parts[3] != "main" && parts[3] != r.commit) {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":"Repository Not Found"}`)
			return
		}
		type lfs struct {
			SHA256 string `json:"sha256"`
			Size   int64  `json:"size"`
		}
		type sib struct {
			RFilename string `json:"rfilename"`
			Size      int64  `json:"size"`
			LFS       *lfs   `json:"lfs"`
		}
		out := struct {
			SHA      string `json:"sha"`
			Siblings []sib  `json:"siblings"`
		}{SHA: r.commit}
		for _, n := range r.order {
			f := r.files[n]
			out.Siblings = append(out.Siblings, sib{RFilename: n, Size: f.size, LFS: &lfs{SHA256: f.sha, Size: f.size}})
		}
		json.NewEncoder(w).Encode(out)
		return
	}
	parts := strings.SplitN(strings.TrimPrefix(req.URL.Path, "/"), "/", 5)
	if len(parts) != 5 || parts[2] != "resolve" {
		http.NotFound(w, req)
		return
	}
	r := h.repos[parts[0]+"/"+parts[1]]
	if r == nil || parts[3] != r.commit {
		http.NotFound(w, req)
		return
	}
	f, ok := r.files[parts[4]]
	if !ok {
		http.NotFound(w, req)
		return
	}
	http.ServeContent(w, req, "", time.Time{}, &zeroTail{hdr: f.header, size: f.size})
}

// zeroTail is a file of size bytes: the header, then zeros.
type zeroTail struct {
	hdr  []byte
	size int64
	off  int64
}

func (z *zeroTail) Read(p []byte) (int, error) {
	n, err := z.ReadAt(p, z.off)
	z.off += int64(n)
	return n, err
}

func (z *zeroTail) ReadAt(p []byte, off int64) (int, error) {
	if off >= z.size {
		return 0, fmt.Errorf("EOF")
	}
	p = p[:min(int64(len(p)), z.size-off)]
	n := 0
	if off < int64(len(z.hdr)) {
		n = copy(p, z.hdr[off:])
	}
	clear(p[n:])
	return len(p), nil
}

func (z *zeroTail) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case 0:
		z.off = off
	case 1:
		z.off += off
	case 2:
		z.off = z.size + off
	}
	return z.off, nil
}

func (h *hub) client(t *testing.T) *source.Client {
	home := t.TempDir()
	c := source.NewClient(func(k string) string {
		return map[string]string{"HF_ENDPOINT": h.srv.URL, "HOME": home}[k]
	})
	c.Backoff = time.Millisecond
	c.Attempts = 1
	t.Cleanup(c.HTTP.CloseIdleConnections)
	return c
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
	h := newHub(t)
	qwen, _ := synth.Lookup("qwen3-0.6b")
	gemma, _ := synth.Lookup("gemma-3-1b")
	h.add(t, "test/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf", qwen, synth.Q8_0)
	h.add(t, "test/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q4_K_M.gguf", qwen, synth.Q4_K_M)
	h.add(t, "test/gemma-3-1b-it-GGUF", "gemma-3-1b-it-Q4_K_M.gguf", gemma, synth.Q4_K_M)
	h.addRaw("test/gemma-3-1b-it-GGUF", "mmproj-F16.gguf", []byte("GGUF"), 1<<20)
	cat := lockCatalog(t)

	l, err := Lock(context.Background(), h.client(t), cat.Entries)
	if err != nil {
		t.Fatal(err)
	}
	qrepo, grepo := h.repos["test/Qwen3-0.6B-GGUF"], h.repos["test/gemma-3-1b-it-GGUF"]

	// Identities: every pinned value is the Hub's.
	if len(l.Packages) != 3 || len(l.Variants) != 4 {
		t.Fatalf("%d packages for %d variants, want 3 for 4: %v", len(l.Packages), len(l.Variants), l.PackageIDs())
	}
	q8 := l.Variants["qwen3-0.6b/Q8_0"]
	wantID := PackageID("test/Qwen3-0.6B-GGUF", qrepo.commit, "Qwen3-0.6B-Q8_0.gguf")
	if q8 == nil || q8.Package != wantID {
		t.Fatalf("qwen3-0.6b/Q8_0 is %+v, want package %s", q8, wantID)
	}
	p := l.Packages[wantID]
	f := qrepo.files["Qwen3-0.6B-Q8_0.gguf"]
	if p.Commit != qrepo.commit || len(p.Files) != 1 || p.Files[0].Size != f.size || p.Files[0].SHA256 != f.sha {
		t.Errorf("package %+v does not carry the Hub's commit, size and sha256 (%s %d %s)", p, qrepo.commit, f.size, f.sha)
	}
	// Sharing: a tag reference and a file reference to the same file.
	if other := l.Variants["qwen3-0.6b-draftpack/Q8_0"]; other == nil || other.Package != wantID {
		t.Errorf("the file reference to the same file has package %+v, want the shared %s", other, wantID)
	}
	// The projector comes from the listing too.
	gv := l.Variants["gemma-3-1b-it/Q4_K_M"]
	if gv == nil || gv.Projector == nil || gv.Projector.Name != "mmproj-F16.gguf" || gv.Projector.SHA256 != grepo.files["mmproj-F16.gguf"].sha {
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
	h.srv.Close()
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
	rows, err := Recommend(cat, back, machine_(t, "rtx-4090"), Options{Goal: GoalBalanced, Exact: -1})
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
	h := newHub(t)
	cat := lockCatalog(t)
	_, err := Lock(context.Background(), h.client(t), cat.Entries)
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
	h := newHub(t)
	qwen, _ := synth.Lookup("qwen3-0.6b")
	gemma, _ := synth.Lookup("gemma-3-1b")
	h.add(t, "test/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf", qwen, synth.Q8_0)
	h.add(t, "test/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q4_K_M.gguf", qwen, synth.Q4_K_M)
	h.add(t, "test/gemma-3-1b-it-GGUF", "gemma-3-1b-it-Q4_K_M.gguf", gemma, synth.Q4_K_M)
	h.addRaw("test/gemma-3-1b-it-GGUF", "mmproj-F16.gguf", []byte("GGUF"), 1<<20)
	cat := lockCatalog(t)
	before, err := Lock(context.Background(), h.client(t), cat.Entries)
	if err != nil {
		t.Fatal(err)
	}
	// The publisher re-quantizes the Q8_0 file with another recipe and
	// uploads it under the same name.
	h.add(t, "test/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q8_0.gguf", qwen, synth.F16)
	after, err := Lock(context.Background(), h.client(t), cat.Entries)
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
