package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// snapshot describes everything under dir: each entry's path, type,
// mode and content digest (link targets for links), so that a test can
// assert nothing there changed or appeared.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fi.Mode().String()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h := sha256.Sum256(b)
			desc += " " + hex.EncodeToString(h[:])
		}
		out[p] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPlantedLinks replays issue #30's second attack: a symbolic link
// planted in the store, pointing out of it. A link at
// partial/<sha256>.part to a 0600 file made pull write the whole model
// into that file, chmod it 0444 and install it as the blob; links at
// models/OWNER, manifests/OWNER or a lock file made it create or write
// files outside. Now every one is refused with the link's path named, and
// the outside directory is byte for byte and mode for mode what it was,
// with nothing added.
func TestPlantedLinks(t *testing.T) {
	data := randomBytes(30, fileSize)
	sum := digest(data)
	tests := []struct {
		name string
		// link is the planted link's path inside the store; target is
		// what it names in the outside directory.
		link, target string
	}{
		{"partial file to an outside file", "partial/" + sum + ".part", "victim"},
		{"partial file to an outside name", "partial/" + sum + ".part", "absent"},
		{"partial directory", "partial", "victimdir"},
		{"blob to an outside file", "blobs/sha256/" + sum, "victim"},
		{"models/OWNER", "models/owner", "victimdir"},
		{"manifests/OWNER", "manifests/owner", "victimdir"},
		{"lock file to an outside file", "locks/" + sum + ".lock", "victim"},
		{"lock file to an outside name", "locks/" + sum + ".lock", "absent"},
		{"locks directory", "locks", "victimdir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &origin{files: map[string][]byte{"/m.gguf": data}}
			srv := serve(t, o)
			s := testStore(t)
			outside := t.TempDir()
			if err := os.WriteFile(filepath.Join(outside, "victim"), []byte("the user's own file\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(outside, "victimdir"), 0o700); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(s.Root, filepath.FromSlash(tt.link))
			if err := os.RemoveAll(link); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(outside, tt.target), link); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, outside)
			_, err := s.Pull(context.Background(), oneFile(srv, "/m.gguf", data))
			if err == nil || !strings.Contains(err.Error(), link) {
				t.Errorf("Pull with a link planted at %s: %v; want a refusal naming it", tt.link, err)
			}
			after := snapshot(t, outside)
			for p, d := range before {
				if after[p] != d {
					t.Errorf("outside the store %s changed from %q to %q", p, d, after[p])
				}
			}
			for p, d := range after {
				if _, ok := before[p]; !ok {
					t.Errorf("outside the store %s appeared: %s", p, d)
				}
			}
		})
	}
}

// TestPlantedHardLink: a hard link at partial/<sha256>.part to a file of
// the user's on the same filesystem would have the download written into
// that file. A part with more than one name is refused.
func TestPlantedHardLink(t *testing.T) {
	data := randomBytes(31, fileSize)
	o := &origin{files: map[string][]byte{"/m.gguf": data}}
	srv := serve(t, o)
	s := testStore(t)
	outside := filepath.Join(filepath.Dir(s.Root), "outside")
	if err := os.Mkdir(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("the user's own file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	part := s.partPath(digest(data))
	if err := os.Link(victim, part); err != nil {
		t.Skip("no hard links here:", err)
	}
	before := snapshot(t, outside)
	_, err := s.Pull(context.Background(), oneFile(srv, "/m.gguf", data))
	if err == nil || !strings.Contains(err.Error(), part) || !strings.Contains(err.Error(), "hard links") {
		t.Errorf("Pull with a hard link planted at %s: %v; want a refusal naming it", part, err)
	}
	after := snapshot(t, outside)
	if len(after) != len(before) || after[victim] != before[victim] {
		t.Errorf("outside the store changed: %v, was %v", after, before)
	}

	// At the blob's name, the planted file is hashed, found altered and
	// its name removed: the file outside keeps its content and its mode.
	if err := os.Remove(part); err != nil {
		t.Fatal(err)
	}
	blob := s.blobPath(digest(data))
	if err := os.Link(victim, blob); err != nil {
		t.Fatal(err)
	}
	m, err := s.Pull(context.Background(), oneFile(srv, "/m.gguf", data))
	if err != nil {
		t.Fatal(err)
	}
	checkInstalled(t, s, m.Files[0], data, true)
	after = snapshot(t, outside)
	if len(after) != len(before) || after[victim] != before[victim] {
		t.Errorf("a hard link planted at the blob changed the file outside: %v, was %v", after, before)
	}
}

// TestLinkRacedIn plants the link after the store's own Lstat check, as
// a process racing a pull would: the open through the store's os.Root
// must still refuse to leave the store, and the error names the link.
func TestLinkRacedIn(t *testing.T) {
	s := testStore(t)
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("the user's own file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, outside)
	for _, rel := range []string{"partial/x.part", "models/owner/x"} {
		abs := filepath.Join(s.Root, filepath.FromSlash(rel))
		link := abs
		if rel == "models/owner/x" {
			link = filepath.Dir(abs)
		}
		target := victim
		if link != abs {
			target = outside
		}
		err := s.confined(abs, noFinalLink, func(r *os.Root, rel string) error {
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			f, err := r.OpenFile(rel, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
			if err == nil {
				f.Close()
			}
			return err
		})
		if err == nil || !strings.Contains(err.Error(), link) {
			t.Errorf("opening %s with a link raced in at %s: %v; want a refusal naming the link", rel, link, err)
		}
	}
	after := snapshot(t, outside)
	if len(after) != len(before) || after[victim] != before[victim] {
		t.Errorf("outside the store changed: %v, was %v", after, before)
	}
}
