package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestConcurrentPulls(t *testing.T) {
	data := randomBytes(10, fileSize)
	// Throttled, so that the pulls overlap.
	o := &origin{files: map[string][]byte{"/m.gguf": data}, chunk: 16 << 10, pause: 5 * time.Millisecond}
	srv := serve(t, o)
	s := testStore(t)
	a := oneFile(srv, "/m.gguf", data)
	const n = 3
	results := make([]*Manifest, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i], errs[i] = s.Pull(context.Background(), a) })
	}
	wg.Wait()
	present := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("pull %d: %v", i, errs[i])
		}
		checkInstalled(t, s, results[i].Files[0], data, true)
		if results[i].Files[0].AlreadyPresent {
			present++
		}
	}
	if present != n-1 {
		t.Errorf("%d pulls found the blob present, expected %d", present, n-1)
	}
	if _, served, _ := o.stats(); served > fileSize*3/2 {
		t.Errorf("served %d bytes for a %d-byte file pulled %d times at once", served, fileSize, n)
	}
}

func TestAlreadyPresent(t *testing.T) {
	data := randomBytes(11, fileSize)
	o := &origin{files: map[string][]byte{"/m.gguf": data}}
	srv := serve(t, o)
	s := testStore(t)
	a := oneFile(srv, "/m.gguf", data)
	if _, err := s.Pull(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	var phases []Phase
	s.Progress = func(p Progress) { phases = append(phases, p.Phase) }
	// The same file in another repository shares the blob.
	b := a
	b.Repo, b.Commit = "other/repo", ""
	for _, art := range []Artifact{a, b} {
		m, err := s.Pull(context.Background(), art)
		if err != nil {
			t.Fatal(err)
		}
		if !m.Files[0].AlreadyPresent {
			t.Errorf("%s: expected the blob already present", art.Repo)
		}
		checkInstalled(t, s, m.Files[0], data, true)
	}
	if requests, _, _ := o.stats(); requests != 1 {
		t.Errorf("%d requests, expected only the first pull's", requests)
	}
	if len(phases) != 2 || phases[0] != PhasePresent || phases[1] != PhasePresent {
		t.Errorf("phases %v, expected present twice", phases)
	}
	if need, err := s.Need(a); err != nil || need != 0 {
		t.Errorf("Need = %d, %v; expected 0", need, err)
	}

	// A blob of the wrong size is corrupt and downloaded again.
	blob := s.blobPath(digest(data))
	if err := os.Chmod(blob, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(blob, 100); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Lookup(a.Repo, a.Commit, []string{"m.gguf"}); ok {
		t.Error("Lookup accepted a truncated blob")
	}
	m, err := s.Pull(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, s, m.Files[0], data, true)
	if requests, _, _ := o.stats(); requests != 2 || m.Files[0].AlreadyPresent {
		t.Errorf("%d requests, present %v; expected the corrupt blob downloaded again", requests, m.Files[0].AlreadyPresent)
	}
}

func TestNotEnoughSpace(t *testing.T) {
	data := randomBytes(12, fileSize)
	o := &origin{files: map[string][]byte{"/m.gguf": data}}
	srv := serve(t, o)
	s := testStore(t)
	s.Reserve = 1 << 20
	var asked string
	s.Free = func(dir string) (int64, error) { asked = dir; return fileSize, nil }
	_, err := s.Pull(context.Background(), oneFile(srv, "/m.gguf", data))
	var se *SpaceError
	if !errors.As(err, &se) {
		t.Fatalf("Pull: %v, expected a *SpaceError", err)
	}
	if se.Need != fileSize || se.Free != fileSize || se.Reserve != 1<<20 || se.Dir != s.Root || asked != s.Root {
		t.Errorf("SpaceError %+v (asked about %s), expected need and free %d, reserve 1 MiB, dir %s", se, asked, fileSize, s.Root)
	}
	if requests, _, _ := o.stats(); requests != 0 {
		t.Errorf("%d requests before the space check failed, expected none", requests)
	}
	// Without the reserve it fits.
	s.Reserve = 0
	if _, err := s.Pull(context.Background(), oneFile(srv, "/m.gguf", data)); err != nil {
		t.Fatal(err)
	}
	// An unsupported measurement skips the check.
	s.Free = func(string) (int64, error) { return 0, fmt.Errorf("no statfs: %w", errors.ErrUnsupported) }
	if _, err := s.Need(oneFile(srv, "/m.gguf", data)); err != nil {
		t.Fatal(err)
	}
	if err := s.checkSpace(1 << 40); err != nil {
		t.Errorf("checkSpace with unsupported measurement: %v, expected no check", err)
	}
}

func TestFreeBytes(t *testing.T) {
	n, err := FreeBytes(t.TempDir())
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil || n <= 0 {
		t.Fatalf("FreeBytes = %d, %v; expected a positive count", n, err)
	}
	if _, err := FreeBytes(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("FreeBytes of a missing directory: expected an error")
	}
}

func TestSplitArtifact(t *testing.T) {
	files := map[string][]byte{}
	a := Artifact{Ref: "hf:o/m:Q4_K_M", Repo: "o/m", Commit: "abc123"}
	srv := serve(t, &origin{files: files})
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("Q4_K_M/model-Q4_K_M-%05d-of-00003.gguf", i)
		files["/"+name] = randomBytes(uint64(20+i), 50<<10+i)
		a.Files = append(a.Files, File{Name: name, URL: srv.URL + "/" + name, Size: int64(len(files["/"+name])), SHA256: digest(files["/"+name])})
	}
	files["/mmproj-f16.gguf"] = randomBytes(30, 10<<10)
	a.Extra = []File{{Name: "mmproj-f16.gguf", URL: srv.URL + "/mmproj-f16.gguf", Size: 10 << 10, SHA256: digest(files["/mmproj-f16.gguf"])}}
	s := testStore(t)
	var counts []int
	s.Progress = func(p Progress) {
		if p.Phase == PhaseDone {
			counts = append(counts, p.Index, p.Count)
		}
	}
	m, err := s.Pull(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(s.Root, "models", "o", "m", "abc123")
	for i, in := range append(m.Files, m.Extra...) {
		checkInstalled(t, s, in, files["/"+in.Name], true)
		if filepath.Dir(in.Path) != dir || filepath.Base(in.Path) != filepath.Base(in.Name) {
			t.Errorf("file %d linked at %s, expected %s/%s", i, in.Path, dir, filepath.Base(in.Name))
		}
	}
	if got := entries(t, dir); len(got) != 4 {
		t.Errorf("%s holds %v, expected three shards and the projector", dir, got)
	}
	if fmt.Sprint(counts) != "[1 4 2 4 3 4 4 4]" {
		t.Errorf("done progress index/count %v, expected 1..4 of 4", counts)
	}
	names := []string{a.Files[0].Name, a.Files[1].Name, a.Files[2].Name}
	if _, ok, err := s.Lookup("o/m", "abc123", names); !ok || err != nil {
		t.Errorf("Lookup of all shards = %v, %v", ok, err)
	}
	if _, ok, _ := s.Lookup("o/m", "abc123", names[:2]); ok {
		t.Error("Lookup accepted two of three shards")
	}
}

func TestHostileNames(t *testing.T) {
	data := randomBytes(40, 1024)
	tests := []struct {
		name         string
		repo, commit string
		file         string
	}{
		{"repo climbs", "../x", "c", "m.gguf"},
		{"repo climbs deeper", "a/../../x", "c", "m.gguf"},
		{"repo absolute", "/etc", "c", "m.gguf"},
		{"repo too deep", "a/b/c", "c", "m.gguf"},
		{"repo backslash", `a\..\..`, "c", "m.gguf"},
		{"commit climbs", "o/m", "..", "m.gguf"},
		{"commit with separator", "o/m", "a/b", "m.gguf"},
		{"file climbs", "o/m", "c", "../../etc/passwd"},
		{"file absolute", "o/m", "c", "/etc/passwd"},
		{"file is dot-dot", "o/m", "c", ".."},
		{"file backslash", "o/m", "c", `..\..\evil.gguf`},
		{"file empty", "o/m", "c", ""},
		{"file control character", "o/m", "c", "a\nb.gguf"},
		{"file drive", "o/m", "c", "C:evil.gguf"},
	}
	o := &origin{files: map[string][]byte{"/m.gguf": data}}
	srv := serve(t, o)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testStore(t)
			a := Artifact{Repo: tt.repo, Commit: tt.commit,
				Files: []File{{Name: tt.file, URL: srv.URL + "/m.gguf", Size: int64(len(data)), SHA256: digest(data)}}}
			if _, err := s.Pull(context.Background(), a); err == nil {
				t.Fatal("Pull accepted a hostile name")
			}
			if _, err := s.Need(a); err == nil {
				t.Error("Need accepted a hostile name")
			}
			if _, _, err := s.Lookup(tt.repo, tt.commit, []string{tt.file}); err == nil {
				t.Error("Lookup accepted a hostile name")
			}
			if got := entries(t, filepath.Dir(s.Root)); len(got) != 1 {
				t.Errorf("beside the store: %v", got)
			}
		})
	}
	if requests, _, _ := o.stats(); requests != 0 {
		t.Errorf("%d requests for hostile artifacts, expected none", requests)
	}
}

func TestDuplicateBaseNames(t *testing.T) {
	s := testStore(t)
	a := Artifact{Repo: "o/m", Files: []File{
		{Name: "a/m.gguf", URL: "http://x/a", Size: 1},
		{Name: "b/m.gguf", URL: "http://x/b", Size: 1},
	}}
	if _, err := s.Pull(context.Background(), a); err == nil || !strings.Contains(err.Error(), "both be linked") {
		t.Errorf("Pull: %v, expected a clash of base names", err)
	}
}

func TestUnknownDigest(t *testing.T) {
	data := randomBytes(41, fileSize)
	o := &origin{files: map[string][]byte{"/m.gguf": data}, cutAt: fileSize / 2, cut: drop}
	srv := serve(t, o)
	s := testStore(t)
	a := Artifact{Ref: srv.URL + "/m.gguf", Files: []File{{Name: "m.gguf", URL: srv.URL + "/m.gguf", Size: -1}}}
	m, err := s.Pull(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, s, m.Files[0], data, false)
	if want := filepath.Join(s.Root, "models", "url", "-", "m.gguf"); m.Files[0].Path != want {
		t.Errorf("linked at %s, expected %s", m.Files[0].Path, want)
	}
	if _, _, ranges := o.stats(); len(ranges) != 2 || ranges[1] == "" {
		t.Errorf("ranges %q, expected a resumed request", ranges)
	}
	if _, ok, err := s.Lookup("", "", []string{"m.gguf"}); !ok || err != nil {
		t.Errorf("Lookup of a URL artifact = %v, %v", ok, err)
	}
}

func TestSymlinkFallback(t *testing.T) {
	data := randomBytes(42, 4096)
	srv := serve(t, &origin{files: map[string][]byte{"/m.gguf": data}})
	s := testStore(t)
	s.hardlink = func(string, string) error { return errors.New("hard links not supported") }
	a := oneFile(srv, "/m.gguf", data)
	m, err := s.Pull(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, s, m.Files[0], data, true)
	fi, err := os.Lstat(m.Files[0].Path)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("link %v, %v; expected a symbolic link", fi, err)
	}
	if _, ok, err := s.Lookup(a.Repo, a.Commit, []string{"m.gguf"}); !ok || err != nil {
		t.Errorf("Lookup through a symlink = %v, %v", ok, err)
	}
}

func TestStalePartIsRestarted(t *testing.T) {
	data := randomBytes(43, fileSize)
	o := &origin{files: map[string][]byte{"/m.gguf": data}}
	srv := serve(t, o)
	s := testStore(t)
	a := oneFile(srv, "/m.gguf", data)
	key := digest(data)
	// A part left by a run that expected another size is not resumed.
	if err := os.WriteFile(s.partPath(key), []byte("garbage"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.sidePath(key), []byte(`{"url":"x","size":7,"sha256":"`+key+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := s.Pull(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, s, m.Files[0], data, true)
	if _, _, ranges := o.stats(); len(ranges) != 1 || ranges[0] != "" {
		t.Errorf("ranges %q, expected one whole request", ranges)
	}
}

func TestLookupAndList(t *testing.T) {
	data := randomBytes(44, 8192)
	other := randomBytes(45, 8192)
	srv := serve(t, &origin{files: map[string][]byte{"/m.gguf": data, "/n.gguf": other}})
	s := testStore(t)
	b := oneFile(srv, "/n.gguf", other)
	b.Repo = "z/last"
	a := oneFile(srv, "/m.gguf", data)
	for _, art := range []Artifact{b, a} {
		if _, err := s.Pull(context.Background(), art); err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Repo != "owner/model" || list[1].Repo != "z/last" {
		t.Fatalf("List = %+v, expected the two artifacts by repository", list)
	}
	if list[0].Files[0].Path != filepath.Join(s.Root, "models", "owner", "model", a.Commit, "m.gguf") {
		t.Errorf("listed path %s, expected an absolute path in the store", list[0].Files[0].Path)
	}
	if _, ok, err := s.Lookup(a.Repo, a.Commit, []string{"other.gguf"}); ok || err != nil {
		t.Errorf("Lookup of another file = %v, %v; expected not found", ok, err)
	}
	if _, ok, err := s.Lookup(a.Repo, "other-commit", []string{"m.gguf"}); ok || err != nil {
		t.Errorf("Lookup of another commit = %v, %v; expected not found", ok, err)
	}
	// A link that no longer names its blob makes the artifact incomplete.
	link := list[0].Files[0].Path
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(link, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Lookup(a.Repo, a.Commit, []string{"m.gguf"}); ok {
		t.Error("Lookup accepted a link replaced by a copy")
	}
	// A missing blob too.
	if err := os.Remove(list[1].Files[0].Blob); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Lookup(b.Repo, b.Commit, []string{"n.gguf"}); ok {
		t.Error("Lookup accepted a missing blob")
	}
	// A manifest pointing out of the store is refused.
	mpath := filepath.Join(s.manifestDir(), "z", "last", b.Commit, "n.gguf.json")
	raw, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(raw), `"blobs/sha256/`, `"../../blobs/sha256/`, 1)
	if err := os.WriteFile(mpath, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Lookup(b.Repo, b.Commit, []string{"n.gguf"}); err == nil || !strings.Contains(err.Error(), "inside the store") {
		t.Errorf("Lookup of a manifest escaping the store: %v", err)
	}
}

func TestContains(t *testing.T) {
	s := testStore(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	inFile := filepath.Join(s.modelDir(), "f.gguf")
	if err := os.WriteFile(inFile, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(s.modelDir(), "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(s.modelDir(), "dirlink")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want bool
	}{
		{inFile, true},
		{filepath.Join(s.Root, "models", "not-yet-there.gguf"), true},
		{s.Root, false},
		{filepath.Join(outside, "secret"), false},
		{filepath.Join(s.Root, "models", "..", "..", "x"), false},
		{s.Root + "/models/../../" + filepath.Base(s.Root) + "-evil/f", false},
		{filepath.Join(s.modelDir(), "escape"), false},
		{filepath.Join(s.modelDir(), "dirlink", "secret"), false},
		{filepath.Join(s.modelDir(), "dirlink", "missing"), false},
		{"models/f.gguf", false},
	}
	for _, tt := range tests {
		if got := s.Contains(tt.path); got != tt.want {
			t.Errorf("Contains(%s) = %v, expected %v", tt.path, got, tt.want)
		}
	}
}

func TestDefaultRoot(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"HEADROOM_STORE": "/s", "XDG_DATA_HOME": "/x", "HOME": "/h"}, "/s"},
		{map[string]string{"XDG_DATA_HOME": "/x", "HOME": "/h"}, "/x/headroom/store"},
		{map[string]string{"XDG_DATA_HOME": "relative", "HOME": "/h"}, "/h/.local/share/headroom/store"},
		{map[string]string{"HOME": "/h"}, "/h/.local/share/headroom/store"},
		{map[string]string{}, ""},
	}
	for _, tt := range tests {
		got := DefaultRoot(func(k string) string { return tt.env[k] })
		if got != filepath.FromSlash(tt.want) {
			t.Errorf("DefaultRoot(%v) = %q, expected %q", tt.env, got, tt.want)
		}
	}
	if _, err := Open(""); err == nil {
		t.Error("Open(\"\"): expected an error")
	}
}

func TestLockWaitsAndCancels(t *testing.T) {
	dir := t.TempDir()
	s := &Store{Root: dir}
	path := filepath.Join(dir, "k.lock")
	release, err := s.acquire(context.Background(), path, func() { t.Error("first acquire waited") })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	waited := false
	if _, err := s.acquire(ctx, path, func() { waited = true }); !errors.Is(err, context.DeadlineExceeded) || !waited {
		t.Fatalf("acquire of a held lock: %v (waited %v), expected to wait until the deadline", err, waited)
	}
	got := make(chan error, 1)
	go func() {
		r, err := s.acquire(context.Background(), path, func() {})
		if err == nil {
			r()
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	release()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting acquire did not get the released lock")
	}
}
