package store

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The store never leaves itself. Every path below Root is reached through
// an os.Root, which refuses a symbolic link or ".." leading out of the
// root at each step of the walk, against directory handles it holds, so a
// link swapped in while a pull runs cannot race it out of the store. On
// top of that a symbolic link anywhere below Root is refused, since the
// store makes none but its own links under models/ (where hard links
// fail): that check looks with Lstat before each operation and can race,
// but a link raced in can only lead to another place inside the store.
// The root directory itself may be a link: the user chose it.

// LinkError is a symbolic link found where the store expects a file or a
// directory of its own. Nothing was followed through it.
type LinkError struct {
	// Path is the link's absolute path.
	Path string
	// Target is what it points to, when it could be read.
	Target string
}

func (e *LinkError) Error() string {
	to := ""
	if e.Target != "" {
		to = " to " + e.Target
	}
	return fmt.Sprintf("model store: expected a file or directory of the store at %s, found a symbolic link%s; the store follows no links (remove it)", e.Path, to)
}

// finalLink says whether the last component of a path may be a link:
// only links under models/ are the store's own.
type finalLink bool

const (
	noFinalLink    finalLink = false
	allowFinalLink finalLink = true
)

// confined runs f on abs, relative to the store's root opened as an
// os.Root, after refusing a symbolic link in any of its directories (and
// in its last component unless final allows one). When f fails, a link on
// the way is what the error names.
func (s *Store) confined(abs string, final finalLink, f func(r *os.Root, rel string) error) error {
	rel, err := filepath.Rel(s.Root, abs)
	if err != nil || !within(s.Root, abs) {
		return fmt.Errorf("model store: %s lies outside the store %s", abs, s.Root)
	}
	r, err := os.OpenRoot(s.Root)
	if err != nil {
		return fmt.Errorf("model store: opening %s: %w", s.Root, err)
	}
	defer r.Close()
	if err := s.noLinks(r, rel, final); err != nil {
		return err
	}
	if err := f(r, rel); err != nil {
		if lerr := s.noLinks(r, rel, final); lerr != nil {
			return lerr
		}
		return err
	}
	return nil
}

// noLinks refuses a symbolic link among rel's components, the last one
// included unless final allows it. Missing components are not an error.
func (s *Store) noLinks(r *os.Root, rel string, final finalLink) error {
	parts := strings.Split(rel, string(filepath.Separator))
	for i := range parts {
		last := i == len(parts)-1
		if last && final == allowFinalLink {
			return nil
		}
		p := filepath.Join(parts[:i+1]...)
		fi, err := r.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return nil // the operation meets and reports it
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := r.Readlink(p)
			return &LinkError{Path: filepath.Join(s.Root, p), Target: target}
		}
	}
	return nil
}

// mkdirAll creates abs and the directories above it inside the store,
// one at a time, refusing a link or a file in the way.
func (s *Store) mkdirAll(abs string) error {
	return s.confined(abs, noFinalLink, func(r *os.Root, rel string) error {
		parts := strings.Split(rel, string(filepath.Separator))
		for i := range parts {
			p := filepath.Join(parts[:i+1]...)
			err := r.Mkdir(p, 0o755)
			if err == nil || !errors.Is(err, fs.ErrExist) {
				if err != nil {
					return err
				}
				continue
			}
			fi, err := r.Lstat(p)
			if err != nil {
				return err
			}
			if fi.Mode()&fs.ModeSymlink != 0 {
				target, _ := r.Readlink(p)
				return &LinkError{Path: filepath.Join(s.Root, p), Target: target}
			}
			if !fi.IsDir() {
				return fmt.Errorf("model store: expected a directory at %s, found a %s", filepath.Join(s.Root, p), fi.Mode().Type())
			}
		}
		return nil
	})
}

// openFile opens abs inside the store. The file opened must be the one
// Lstat sees at its name, so a link raced into the last component after
// the check is caught before anything is written.
func (s *Store) openFile(abs string, flag int, perm os.FileMode) (*os.File, error) {
	var f *os.File
	err := s.confined(abs, noFinalLink, func(r *os.Root, rel string) error {
		var err error
		if f, err = r.OpenFile(rel, flag, perm); err != nil {
			return err
		}
		fi, ferr := f.Stat()
		li, lerr := r.Lstat(rel)
		if ferr == nil && lerr == nil && li.Mode()&fs.ModeSymlink == 0 && os.SameFile(fi, li) {
			return nil
		}
		f.Close()
		f = nil
		if lerr == nil && li.Mode()&fs.ModeSymlink != 0 {
			target, _ := r.Readlink(rel)
			return &LinkError{Path: abs, Target: target}
		}
		return fmt.Errorf("model store: %s changed while it was opened", abs)
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// lstat describes abs itself, a link included.
func (s *Store) lstat(abs string) (fs.FileInfo, error) {
	var fi fs.FileInfo
	err := s.confined(abs, allowFinalLink, func(r *os.Root, rel string) (err error) {
		fi, err = r.Lstat(rel)
		return err
	})
	return fi, err
}

// stat describes what abs names, following a last link only inside the
// store (the links the store makes under models/).
func (s *Store) stat(abs string) (fs.FileInfo, error) {
	var fi fs.FileInfo
	err := s.confined(abs, allowFinalLink, func(r *os.Root, rel string) (err error) {
		fi, err = r.Stat(rel)
		return err
	})
	return fi, err
}

func (s *Store) readFile(abs string) ([]byte, error) {
	var b []byte
	err := s.confined(abs, noFinalLink, func(r *os.Root, rel string) (err error) {
		b, err = r.ReadFile(rel)
		return err
	})
	return b, err
}

func (s *Store) chmod(abs string, mode os.FileMode) error {
	return s.confined(abs, noFinalLink, func(r *os.Root, rel string) error { return r.Chmod(rel, mode) })
}

func (s *Store) chtimes(abs string, t time.Time) error {
	return s.confined(abs, noFinalLink, func(r *os.Root, rel string) error { return r.Chtimes(rel, t, t) })
}

// remove removes abs itself, a link included.
func (s *Store) remove(abs string) error {
	return s.confined(abs, allowFinalLink, func(r *os.Root, rel string) error { return r.Remove(rel) })
}

// rename replaces newAbs with oldAbs; rename follows neither, so either
// may be a link (the store's own under models/; callers that expect a
// file check it first).
func (s *Store) rename(oldAbs, newAbs string) error {
	return s.confined(oldAbs, allowFinalLink, func(r *os.Root, oldRel string) error {
		return s.confined(newAbs, allowFinalLink, func(_ *os.Root, newRel string) error {
			return r.Rename(oldRel, newRel)
		})
	})
}

// hardlinkIn makes newAbs a hard link to oldAbs, which must not be a link.
func (s *Store) hardlinkIn(oldAbs, newAbs string) error {
	return s.confined(oldAbs, noFinalLink, func(r *os.Root, oldRel string) error {
		return s.confined(newAbs, noFinalLink, func(_ *os.Root, newRel string) error {
			return r.Link(oldRel, newRel)
		})
	})
}

// symlink makes newAbs a link to target, a path relative to newAbs's
// directory that stays inside the store.
func (s *Store) symlink(target, newAbs string) error {
	if !within(s.Root, filepath.Join(filepath.Dir(newAbs), target)) {
		return fmt.Errorf("model store: a link at %s to %s would lead out of the store", newAbs, target)
	}
	return s.confined(newAbs, noFinalLink, func(r *os.Root, rel string) error { return r.Symlink(target, rel) })
}

// createTemp creates a new file in dir, exclusively, under a name made of
// prefix, a random part and suffix.
func (s *Store) createTemp(dir, prefix, suffix string) (*os.File, string, error) {
	for range 100 {
		name := filepath.Join(dir, fmt.Sprintf("%s%016x%s", prefix, rand.Uint64(), suffix))
		f, err := s.openFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", fmt.Errorf("model store: no free temporary name in %s after 100 tries", dir)
}
