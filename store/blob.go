package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// present reports whether the blob of sum is in the store with the given
// size (any size when size < 0) and still has the content it is named by
// (see check). A blob of the wrong size is corrupt and one whose content
// changed is altered: either is removed so that a fresh download can take
// its place, and altered is the digest an altered one had.
func (s *Store) present(ctx context.Context, sum string, size int64, rep *reporter) (n int64, ok bool, altered string, err error) {
	blob := s.blobPath(sum)
	fi, err := s.lstat(blob)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, "", nil
	}
	if err != nil {
		return 0, false, "", fmt.Errorf("checking blob %s: %w", blob, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(blob)
		return 0, false, "", &LinkError{Path: blob, Target: target}
	}
	if !fi.Mode().IsRegular() || (size >= 0 && fi.Size() != size) {
		if err := s.removeBlob(blob); err != nil {
			return 0, false, "", fmt.Errorf("removing blob %s: expected %d bytes, found %d, and it could not be removed: %w", blob, size, fi.Size(), err)
		}
		return 0, false, "", nil
	}
	err = s.check(ctx, sum, fi, rep)
	var ae *AlteredError
	if errors.As(err, &ae) {
		return 0, false, ae.Got, s.dropAltered(sum)
	}
	if err != nil {
		return 0, false, "", err
	}
	return fi.Size(), true, "", nil
}

// install moves a finished, verified part into blobs/. The rename is the
// moment the blob appears, complete, so a crash leaves either no blob or
// a whole one.
func (s *Store) install(ctx context.Context, j job, sum string, size int64, rep *reporter) (string, error) {
	blob := s.blobPath(sum)
	if j.want == "" {
		// A file found by URL may turn out to be one the store has.
		if _, ok, _, err := s.present(ctx, sum, size, rep); err != nil {
			return "", fmt.Errorf("%s: %w", j.file.Name, err)
		} else if ok {
			s.discard(j.key)
			return blob, nil
		}
	}
	part := s.partPath(j.key)
	if err := s.chmod(part, 0o444); err != nil {
		return "", fmt.Errorf("%s: installing %s: %w", j.file.Name, part, err)
	}
	if err := s.rename(part, blob); err != nil {
		_ = s.chmod(part, 0o644)
		return "", fmt.Errorf("%s: installing %s as %s: %w", j.file.Name, part, blob, err)
	}
	syncDir(s.blobDir())
	if err := s.remove(s.sidePath(j.key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s: removing the description of its finished download: %w", j.file.Name, err)
	}
	return blob, nil
}

// discard removes a part and its sidecar; what is left of a failed removal
// is replaced by the next download.
func (s *Store) discard(key string) {
	_ = s.remove(s.partPath(key))
	_ = s.remove(s.sidePath(key))
}

// link makes path name the blob: a hard link, or a symlink where hard
// links fail (another filesystem, or one without them). The link is made
// under a temporary name and renamed, so path never names anything partial.
func (s *Store) link(blob, path string) error {
	if fi, err := s.stat(path); err == nil {
		if bi, err := s.lstat(blob); err == nil && bi.Mode().IsRegular() && os.SameFile(fi, bi) {
			return nil
		}
	}
	dir := filepath.Dir(path)
	tmp := filepath.Join(dir, fmt.Sprintf(".link-%016x.tmp", rand.Uint64()))
	hardlink := s.hardlink
	if hardlink == nil {
		hardlink = s.hardlinkIn
	}
	if herr := hardlink(blob, tmp); herr != nil {
		// Relative, so that the store can be moved as a whole.
		target, err := filepath.Rel(dir, blob)
		if err != nil {
			target = blob
		}
		if err := s.symlink(target, tmp); err != nil {
			return fmt.Errorf("linking %s to %s: expected a hard or symbolic link, both failed: %v; %w", path, blob, herr, err)
		}
	}
	if err := s.rename(tmp, path); err != nil {
		_ = s.remove(tmp)
		return fmt.Errorf("linking %s to %s: %w", path, blob, err)
	}
	syncDir(dir)
	return nil
}

// sidecar describes what a part belongs to, so that a part left by an
// earlier run is resumed only for the same file.
type sidecar struct {
	// URL is without its query, which may carry a signature.
	URL    string `json:"url"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
	// ETag is the server's strong validator, for If-Range when there is
	// no digest to check the file with.
	ETag string `json:"etag,omitempty"`
}

// matches reports whether a part described by c can continue one
// described by want. With a known digest any URL serving it will do.
func (c *sidecar) matches(want sidecar) bool {
	if c.Size != want.Size || c.SHA256 != want.SHA256 {
		return false
	}
	return want.SHA256 != "" || c.URL == want.URL
}

// readSidecar returns nil when the sidecar is missing or unreadable: the
// part is then started over, which is always safe.
func (s *Store) readSidecar(path string) *sidecar {
	b, err := s.readFile(path)
	if err != nil {
		return nil
	}
	var c sidecar
	if json.Unmarshal(b, &c) != nil {
		return nil
	}
	return &c
}

func (s *Store) writeSidecar(d *dl) error {
	b, err := json.MarshalIndent(d.side, "", "  ")
	if err != nil {
		return fmt.Errorf("%s: describing the partial download: %w", d.j.file.Name, err)
	}
	if err := s.writeAtomic(s.sidePath(d.j.key), append(b, '\n')); err != nil {
		return fmt.Errorf("%s: describing the partial download: %w", d.j.file.Name, err)
	}
	return nil
}

// writeAtomic replaces path with data through a temporary file and a
// rename, so that readers see the old content or the new, never a mix.
func (s *Store) writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, tmp, err := s.createTemp(dir, ".tmp-", "")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.chmod(tmp, 0o644)
	}
	if err == nil {
		err = s.rename(tmp, path)
	}
	if err != nil {
		_ = s.remove(tmp)
		return err
	}
	syncDir(dir)
	return nil
}

// syncDir makes a rename in dir durable. Some systems cannot sync a
// directory; the rename is then as durable as they make it.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
