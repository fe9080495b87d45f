package store

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAlteredBlob replays issue #30's sixth attack: eight bytes
// overwritten in an installed blob, its size kept, made `pull --json` say
// "verified": true and "already present", and serve load the altered
// file; only the size was checked. The writer here is careful: it puts
// the blob's mode and modification time back. The change of the inode's
// status-change time, which no user process can set, gives it away: the
// blob is hashed again, found altered, removed and downloaded again, and
// Lookup (serve --no-pull) refuses it.
func TestAlteredBlob(t *testing.T) {
	data := randomBytes(60, fileSize)
	o := &origin{files: map[string][]byte{"/m.gguf": data}}
	srv := serve(t, o)
	s := testStore(t)
	a := oneFile(srv, "/m.gguf", data)
	if _, err := s.Pull(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	var phases []Phase
	s.Progress = func(p Progress) { phases = append(phases, p.Phase) }

	// Untouched, the blob is trusted on its stamp: no hashing.
	m, err := s.Pull(context.Background(), a)
	if err != nil || !m.Files[0].AlreadyPresent || !m.Files[0].Verified {
		t.Fatalf("second pull: %+v, %v; want the blob present and verified", m, err)
	}
	if slices.Contains(phases, PhaseVerify) {
		t.Errorf("an untouched blob was hashed again (phases %v)", phases)
	}

	blob := s.blobPath(digest(data))
	before, err := os.Stat(blob)
	if err != nil {
		t.Fatal(err)
	}
	altered := slices.Clone(data)
	copy(altered[1000:], "PWNED!!!")
	if err := os.Chmod(blob, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(blob, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(altered[1000:1008], 1000); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chmod(blob, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(blob, time.Time{}, before.ModTime()); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(blob)
	if err != nil || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) || after.Mode() != before.Mode() {
		t.Fatalf("the altered blob's size, mode or mtime differ: %v, %v; the test means them kept", after, err)
	}

	_, ok, err := s.Lookup(a.Repo, a.Commit, []string{"m.gguf"})
	var ae *AlteredError
	if ok || !errors.As(err, &ae) || ae.Got != digest(altered) || !strings.Contains(err.Error(), blob) {
		t.Errorf("Lookup of the altered blob: ok %v, %v; want an *AlteredError naming %s", ok, err, blob)
	}

	phases = nil
	m, err = s.Pull(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	in := m.Files[0]
	if in.AlreadyPresent || in.Altered != digest(altered) {
		t.Errorf("pull over the altered blob: present %v, altered %q; want it found altered (%s) and downloaded again", in.AlreadyPresent, in.Altered, digest(altered))
	}
	checkInstalled(t, s, in, data, true)
	if requests, _, _ := o.stats(); requests != 2 {
		t.Errorf("%d requests; want 2 (the first pull and the download replacing the altered blob)", requests)
	}
	if !slices.Contains(phases, PhaseVerify) {
		t.Errorf("phases %v; want the altered blob hashed (verify) before it was replaced", phases)
	}
	if _, ok, err := s.Lookup(a.Repo, a.Commit, []string{"m.gguf"}); !ok || err != nil {
		t.Errorf("Lookup after the pull replaced the altered blob: %v, %v", ok, err)
	}

	// A blob touched without a change of content (its mode set again) is
	// hashed again, found intact and kept: nothing is downloaded.
	if err := os.Chmod(blob, 0o444); err != nil {
		t.Fatal(err)
	}
	phases = nil
	m, err = s.Pull(context.Background(), a)
	if err != nil || !m.Files[0].AlreadyPresent || m.Files[0].Altered != "" || !slices.Contains(phases, PhaseVerify) {
		t.Errorf("pull over a touched, intact blob: %+v, %v, phases %v; want it hashed and kept", m, err, phases)
	}
	if requests, _, _ := o.stats(); requests != 2 {
		t.Errorf("%d requests after an intact blob was checked; want still 2", requests)
	}
}

// TestPresentOnFullDisk: a full disk refused to "pull" a model already
// present and verified, for want of space it would not use. With nothing
// to download there is no space check; a blob that changed since it was
// verified may have to be downloaded and still counts.
func TestPresentOnFullDisk(t *testing.T) {
	data := randomBytes(61, fileSize)
	o := &origin{files: map[string][]byte{"/m.gguf": data}}
	srv := serve(t, o)
	s := testStore(t)
	a := oneFile(srv, "/m.gguf", data)
	if _, err := s.Pull(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	s.Reserve = DefaultReserve
	s.Free = func(string) (int64, error) { return 0, nil }
	m, err := s.Pull(context.Background(), a)
	if err != nil || !m.Files[0].AlreadyPresent {
		t.Fatalf("pull of a present model on a full disk: %+v, %v; want it present", m, err)
	}
	if err := os.Chmod(s.blobPath(digest(data)), 0o444); err != nil {
		t.Fatal(err)
	}
	var se *SpaceError
	if _, err := s.Pull(context.Background(), a); !errors.As(err, &se) || se.Need != fileSize {
		t.Errorf("pull of a blob changed since it was verified, on a full disk: %v; want a *SpaceError counting %d bytes", err, fileSize)
	}
}
