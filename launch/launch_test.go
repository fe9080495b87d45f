package launch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/source/hubtest"
	"github.com/headroom-llm/headroom/store"
	"github.com/headroom-llm/headroom/synth"
)

// fixture is a Hub with a small model that fits every preset (Mamba2-130M,
// hashed, so it can really be downloaded and verified) and a 70B that fits
// no small machine (listed only, never downloaded).
type fixture struct {
	hub   *hubtest.Hub
	deps  *Deps
	store *store.Store
	said  *strings.Builder
}

const (
	smallRepo = "test/mamba-GGUF"
	smallFile = "Mamba2-130M-Q8_0.gguf"
	bigRepo   = "test/llama-70b-GGUF"
	bigFile   = "Llama-3.1-70B-Q4_K_M.gguf"
)

func newFixture(t *testing.T, machine string) *fixture {
	t.Helper()
	hub := hubtest.New(t)
	hub.AddGGUF(t, smallRepo, smallFile, "mamba2-130m", synth.Q8_0, true)
	hub.AddGGUF(t, bigRepo, bigFile, "llama-3.1-70b", synth.Q4_K_M, false)
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := hw.LoadMachine(machine)
	if err != nil {
		t.Fatal(err)
	}
	said := &strings.Builder{}
	var mu sync.Mutex
	d := &Deps{Client: hub.Client(t), Catalog: cat,
		Machine: func(context.Context) (*hw.Snapshot, error) { return snap, nil },
		Say: func(state, line string) {
			mu.Lock()
			defer mu.Unlock()
			said.WriteString(state + " " + line + "\n")
		}}
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if st.HTTP, err = d.Client.DownloadClient(); err != nil {
		t.Fatal(err)
	}
	st.Backoff = 0
	return &fixture{hub: hub, deps: d, store: st, said: said}
}

func (f *fixture) resolveAssess(t *testing.T, ref string) (*Model, *Assessed, error) {
	t.Helper()
	m, err := f.deps.Resolve(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.deps.Assess(context.Background(), m, plan.DefaultSearch())
	return m, a, err
}

func TestPullRefusesWhatDoesNotFitBeforeAnyWeightMoves(t *testing.T) {
	f := newFixture(t, "m4-16")
	m, _, aerr := f.resolveAssess(t, "hf:"+bigRepo+"/"+bigFile)
	var nf *NotFit
	if !errors.As(aerr, &nf) || nf.Verdict != plan.DoesNotFit {
		t.Fatalf("a 70B (40 GiB) on a 16 GB Mac: want does_not_fit, got %v", aerr)
	}
	_, err := f.deps.Pull(context.Background(), m, aerr, f.store, false)
	if !errors.As(err, &nf) {
		t.Fatalf("pull: want the refusal, got %v", err)
	}
	// The header was read with range requests, each starting inside it,
	// and the client kept little more than the header; no request asked
	// for the weights.
	_, _, ranges := f.hub.Served(bigRepo, bigFile)
	hdr := m.Header.Model.Files[0].DataOffset
	for _, r := range ranges {
		start, _, _ := strings.Cut(strings.TrimPrefix(r, "bytes="), "-")
		if n, err := strconv.ParseInt(start, 10, 64); r == "" || err != nil || n >= hdr {
			t.Errorf("request with Range %q for a file whose header ends at %d", r, hdr)
		}
	}
	if got := m.Header.Stats.BytesFetched; got > hdr+1<<20 {
		t.Errorf("read %d bytes for a %d-byte header", got, hdr)
	}
	if ms, _ := f.store.List(); len(ms) != 0 {
		t.Errorf("the store holds %d artifacts after a refused pull", len(ms))
	}
	t.Logf("refused after %d range requests, %d bytes read for a %d-byte header: %v", len(ranges), m.Header.Stats.BytesFetched, hdr, err)
}

func TestPullForceSaysWhatItOverrides(t *testing.T) {
	f := newFixture(t, "rtx-3060-12")
	// Nothing fits a machine with 64 MiB: the small model is refused, and
	// --force pulls it anyway.
	snap, _ := hw.LoadMachine("rtx-3060-12")
	tiny := *snap
	tiny.Domains = append([]hw.Domain(nil), snap.Domains...)
	tiny.Devices = nil
	for _, d := range snap.Devices {
		if d.Type == hw.TypeCPU {
			tiny.Devices = append(tiny.Devices, d)
		}
	}
	for i := range tiny.Domains {
		tiny.Domains[i].Capacity = 64 << 20
		tiny.Domains[i].Free = nil
	}
	f.deps.Machine = func(context.Context) (*hw.Snapshot, error) { return &tiny, nil }
	m, _, aerr := f.resolveAssess(t, "hf:"+smallRepo+"/"+smallFile)
	if aerr == nil {
		t.Fatal("test premise: the small model fits 64 MiB")
	}
	p, err := f.deps.Pull(context.Background(), m, aerr, f.store, true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Overridden, "--force") || !strings.Contains(p.Overridden, "does not fit") {
		t.Errorf("Overridden = %q; want it to say what --force overrode", p.Overridden)
	}
	if !p.Manifest.Files[0].Verified {
		t.Error("forced pull installed an unverified file")
	}
}

func TestPullResumesAndVerifies(t *testing.T) {
	f := newFixture(t, "rtx-4090")
	m, _, aerr := f.resolveAssess(t, "hf:"+smallRepo+"/"+smallFile)
	if aerr != nil {
		t.Fatal(aerr)
	}
	size := m.Header.Artifact.Files[0].Size
	f.hub.DropOnce(smallRepo, smallFile, size/2)
	p, err := f.deps.Pull(context.Background(), m, nil, f.store, false)
	if err != nil {
		t.Fatalf("pull with a connection dropped halfway: %v", err)
	}
	f.hub.Quiet()
	total, _, ranges := f.hub.Served(smallRepo, smallFile)
	resumed := false
	for _, r := range ranges {
		if strings.HasPrefix(r, "bytes=") && !strings.HasPrefix(r, "bytes=0-") {
			resumed = true
		}
	}
	if !resumed || total > size*3/2+int64(len(ranges))<<22 {
		t.Errorf("served %d bytes of a %d-byte file with ranges %v; want a resume, not a restart", total, size, ranges)
	}
	got, err := os.ReadFile(p.Path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(got)) != size || filepath.Base(p.Path) != smallFile {
		t.Errorf("installed %s with %d bytes, want %s with %d", p.Path, len(got), smallFile, size)
	}
	if man, ok, err := f.store.Lookup(smallRepo, m.Header.Artifact.Commit, []string{smallFile}); err != nil || !ok || !man.Files[0].Verified {
		t.Errorf("lookup after pull: %v %v %v", man, ok, err)
	}
	// A second pull moves nothing.
	if _, err := f.deps.Pull(context.Background(), m, nil, f.store, false); err != nil {
		t.Fatal(err)
	}
	if again, _, _ := f.hub.Served(smallRepo, smallFile); again != total {
		t.Errorf("a second pull of an installed model fetched %d more bytes", again-total)
	}
}

func TestPullRejectsCorruptDownload(t *testing.T) {
	f := newFixture(t, "rtx-4090")
	m, _, aerr := f.resolveAssess(t, "hf:"+smallRepo+"/"+smallFile)
	if aerr != nil {
		t.Fatal(aerr)
	}
	f.hub.Corrupt(smallRepo, smallFile)
	_, err := f.deps.Pull(context.Background(), m, nil, f.store, false)
	var ce *store.ChecksumError
	if !errors.As(err, &ce) {
		t.Fatalf("want a checksum error, got %v", err)
	}
	if _, ok, _ := f.store.Lookup(smallRepo, m.Header.Artifact.Commit, []string{smallFile}); ok {
		t.Error("a corrupt download was installed")
	}
	var leftovers []string
	filepath.WalkDir(f.store.Root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".lock") {
			leftovers = append(leftovers, strings.TrimPrefix(p, f.store.Root))
		}
		return nil
	})
	if len(leftovers) != 0 {
		t.Errorf("files left in the store after a rejected download: %v", leftovers)
	}
}

func TestPullKilledHalfwayResumes(t *testing.T) {
	f := newFixture(t, "rtx-4090")
	m, _, aerr := f.resolveAssess(t, "hf:"+smallRepo+"/"+smallFile)
	if aerr != nil {
		t.Fatal(aerr)
	}
	size := m.Header.Artifact.Files[0].Size
	ctx, cancel := context.WithCancel(context.Background())
	// The Hub stops halfway and waits; the pull is cancelled there.
	held := f.hub.HoldAfter(smallRepo, smallFile, size/2)
	go func() {
		<-held
		cancel()
	}()
	if _, err := f.deps.Pull(ctx, m, nil, f.store, false); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted pull: want context.Canceled, got %v", err)
	}
	if _, ok, _ := f.store.Lookup(smallRepo, m.Header.Artifact.Commit, []string{smallFile}); ok {
		t.Fatal("an interrupted pull was presented as installed")
	}
	f.store.Progress = nil
	f.hub.Quiet() // the interrupted answer may still be writing
	before, _, _ := f.hub.Served(smallRepo, smallFile)
	p, err := f.deps.Pull(context.Background(), m, nil, f.store, false)
	if err != nil {
		t.Fatal(err)
	}
	after, _, ranges := f.hub.Served(smallRepo, smallFile)
	if last := ranges[len(ranges)-1]; strings.HasPrefix(last, "bytes=0-") || after-before >= size {
		t.Errorf("the second pull fetched %d of %d bytes (last range %q); want only the rest", after-before, size, last)
	}
	if !p.Manifest.Files[0].Verified {
		t.Error("resumed file not verified")
	}
}

func TestDraftOfCatalogVariant(t *testing.T) {
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	d := &Deps{Catalog: cat}
	var with, without string
	for _, e := range cat.Entries {
		if e.Draft != nil && with == "" {
			with = e.ID + "/" + e.Variants[0].Quant
		}
		if e.Draft == nil && without == "" {
			without = e.ID + "/" + e.Variants[0].Quant
		}
	}
	entry, _, _ := strings.Cut(with, "/")
	want := cat.Entry(entry).Draft
	if got, ok := d.Draft(&Model{Variant: with}); !ok || got != want.Entry+"/"+want.Quant {
		t.Errorf("draft of %s: %q %v, want %s/%s", with, got, ok, want.Entry, want.Quant)
	}
	if got, ok := d.Draft(&Model{Variant: without}); ok {
		t.Errorf("draft of %s, which has none: %q", without, got)
	}
	if got, ok := d.Draft(&Model{Ref: "hf:o/r:Q4_K_M"}); ok {
		t.Errorf("draft of a model outside the catalog: %q", got)
	}
	// Its draft must itself be a catalog variant pull can resolve.
	dm, _, _ := strings.Cut(want.Entry+"/"+want.Quant, "/")
	if e := cat.Entry(dm); e == nil || e.Variant(want.Quant) == nil {
		t.Errorf("draft %s/%s is not a catalog variant", want.Entry, want.Quant)
	}
}
