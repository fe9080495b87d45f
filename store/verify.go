package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// A blob's name is its sha256, but a name proves nothing once the file is
// on disk: anything that can write the store can change its bytes. Hashing
// a 20 GB model again on every pull and load costs about 20 s (sha256 runs
// at 0.8-1.0 GB/s on the machines measured, docs/security.md), so the
// digest is computed when the blob is installed and then bound to the
// inode it was computed on: device, inode number, size, modification and
// status-change times (stamp). A blob whose stamp no longer matches is
// hashed again before it is reported verified. The status-change time
// (ctime) is set by the kernel on every write, chmod, link or rename and
// cannot be set back by a user process, so restoring the modification
// time does not hide a write.

// stamp is what a blob's verification is bound to, kept as
// verified/<sha256>.json.
type stamp struct {
	SHA256  string `json:"sha256"`
	Size    int64  `json:"size"`
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	MtimeNS int64  `json:"mtime_ns"`
	CtimeNS int64  `json:"ctime_ns"`
}

// maxStampBytes bounds a stamp read: headroom's are under 300 bytes.
const maxStampBytes = 4 << 10

func (s *Store) verifiedDir() string         { return filepath.Join(s.Root, "verified") }
func (s *Store) stampPath(sum string) string { return filepath.Join(s.verifiedDir(), sum+".json") }

// stampOf binds sum to the file fi describes.
func stampOf(sum string, fi fs.FileInfo) stamp {
	st := stamp{SHA256: sum, Size: fi.Size(), MtimeNS: fi.ModTime().UnixNano()}
	st.Dev, st.Ino, st.CtimeNS = identity(fi)
	return st
}

func (s *Store) readStamp(sum string) (stamp, bool) {
	f, err := s.openFile(s.stampPath(sum), os.O_RDONLY, 0)
	if err != nil {
		return stamp{}, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStampBytes))
	var st stamp
	if err != nil || json.Unmarshal(b, &st) != nil {
		return stamp{}, false
	}
	return st, true
}

// writeStamp records that the blob of sum, as it is now, was verified.
// The caller hashed it (or installed it from bytes it hashed) and made the
// store's last change to it, a link or a rename, just before.
func (s *Store) writeStamp(sum string) error {
	fi, err := s.lstat(s.blobPath(sum))
	if err != nil {
		return fmt.Errorf("recording the verification of blob %s: %w", sum, err)
	}
	b, err := json.Marshal(stampOf(sum, fi))
	if err != nil {
		return err
	}
	if err := s.mkdirAll(s.verifiedDir()); err != nil {
		return err
	}
	if err := s.writeAtomic(s.stampPath(sum), append(b, '\n')); err != nil {
		return fmt.Errorf("recording the verification of blob %s: %w", sum, err)
	}
	return nil
}

// AlteredError is an installed blob whose content no longer has the
// digest it is named by: changed on disk after it was verified.
type AlteredError struct {
	Blob string
	// Want is the digest the blob is named by; Got the one it has now.
	Want, Got string
}

func (e *AlteredError) Error() string {
	return fmt.Sprintf("blob %s was altered after it was verified: expected sha256 %s, found %s", e.Blob, e.Want, e.Got)
}

// check verifies the blob of sum, a regular file that fi describes: by its
// stamp when the file is still the one that was verified, else by hashing
// it again (and stamping it when it matches). An altered blob is an
// *AlteredError; nothing is removed here.
func (s *Store) check(ctx context.Context, sum string, fi fs.FileInfo, rep *reporter) error {
	if st, ok := s.readStamp(sum); ok && st == stampOf(sum, fi) {
		return nil
	}
	blob := s.blobPath(sum)
	f, err := s.openFile(blob, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("verifying blob %s: %w", blob, err)
	}
	defer f.Close()
	size := fi.Size()
	seen := func(int64) {}
	if rep != nil {
		rep.verify(0, size)
		seen = func(k int64) { rep.verify(k, size) }
	}
	h := sha256.New()
	if _, err := io.CopyBuffer(h, &ctxReader{ctx: ctx, r: f, seen: seen}, make([]byte, copyBuffer)); err != nil {
		return fmt.Errorf("verifying blob %s: %w", blob, err)
	}
	after, err := f.Stat()
	if err != nil {
		return fmt.Errorf("verifying blob %s: %w", blob, err)
	}
	if stampOf(sum, after) != stampOf(sum, fi) {
		return fmt.Errorf("verifying blob %s: it changed while it was hashed", blob)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return &AlteredError{Blob: blob, Want: sum, Got: got}
	}
	return s.writeStamp(sum)
}

// removeBlob removes a blob's name. Blobs are read-only, which Windows
// also applies to removal, so there the mode is set first; elsewhere the
// file is left as it is, since a blob planted as a hard link shares its
// inode, and its mode, with a file outside the store.
func (s *Store) removeBlob(blob string) error {
	if runtime.GOOS == "windows" {
		_ = s.chmod(blob, 0o644)
	}
	return s.remove(blob)
}

// dropAltered removes an altered blob and its stamp, so that the next
// download takes its place.
func (s *Store) dropAltered(sum string) error {
	blob := s.blobPath(sum)
	if err := s.removeBlob(blob); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing altered blob %s: %w", blob, err)
	}
	if err := s.remove(s.stampPath(sum)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the verification of altered blob %s: %w", blob, err)
	}
	return nil
}
