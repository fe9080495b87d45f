package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// manifestFormat is the version of the manifest files this package writes.
const manifestFormat = 1

// Installed is one installed file.
type Installed struct {
	// Name is the file's name in the artifact.
	Name string `json:"name"`
	// SHA256 is the digest of the content, in lowercase hex.
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Blob is the content's absolute path under blobs/.
	Blob string `json:"blob"`
	// Path is the absolute path under models/ that carries the file's
	// base name; give this one to llama-server.
	Path string `json:"path"`
	// Verified says the content matched an expected digest. A file
	// pulled from a URL without a known digest is not verified; the
	// caller decides whether to trust it.
	Verified bool `json:"verified"`
	// AlreadyPresent says Pull found the blob in the store and downloaded
	// nothing. It describes one Pull and is not stored.
	AlreadyPresent bool `json:"-"`
	// Altered, when not "", is the sha256 the installed blob of this file
	// was found to have instead of its own: Pull removed it and downloaded
	// the file again. It describes one Pull and is not stored.
	Altered string `json:"-"`
}

// Manifest records one installed artifact.
type Manifest struct {
	Ref    string `json:"ref,omitempty"`
	Repo   string `json:"repo,omitempty"`
	Commit string `json:"commit,omitempty"`
	// Dir is the absolute directory under models/ holding the links.
	Dir string `json:"dir"`
	// Files are the model's files in order; Extra the projector and
	// draft files installed with it.
	Files       []Installed `json:"files"`
	Extra       []Installed `json:"extra,omitempty"`
	InstalledAt time.Time   `json:"installed_at"`
}

// diskManifest is a manifest as stored: paths relative to the root, so
// that the store can be moved as a whole.
type diskManifest struct {
	Format int `json:"format"`
	Manifest
}

func (s *Store) writeManifest(path string, m *Manifest) error {
	d := diskManifest{Format: manifestFormat, Manifest: *m}
	d.Files = slices.Clone(m.Files)
	d.Extra = slices.Clone(m.Extra)
	var err error
	rel := func(p string) string {
		r, rerr := filepath.Rel(s.Root, p)
		if rerr != nil && err == nil {
			err = rerr
		}
		return filepath.ToSlash(r)
	}
	d.Dir = rel(d.Dir)
	for _, list := range [][]Installed{d.Files, d.Extra} {
		for i := range list {
			list[i].Blob, list[i].Path = rel(list[i].Blob), rel(list[i].Path)
		}
	}
	if err != nil {
		return fmt.Errorf("manifest %s: %w", path, err)
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return fmt.Errorf("manifest %s: %w", path, err)
	}
	if err := s.mkdirAll(filepath.Dir(path)); err != nil {
		return fmt.Errorf("manifest %s: %w", path, err)
	}
	if err := s.writeAtomic(path, append(b, '\n')); err != nil {
		return fmt.Errorf("writing manifest %s: %w", path, err)
	}
	return nil
}

// readManifest reads a manifest and makes its paths absolute, refusing
// any that would leave the root.
func (s *Store) readManifest(path string) (*Manifest, error) {
	b, err := s.readFile(path)
	if err != nil {
		return nil, err
	}
	var d diskManifest
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("manifest %s: expected JSON: %w", path, err)
	}
	if d.Format != manifestFormat {
		return nil, fmt.Errorf("manifest %s: expected format %d, found %d", path, manifestFormat, d.Format)
	}
	m := d.Manifest
	var bad string
	abs := func(p string) string {
		q := filepath.Join(s.Root, filepath.FromSlash(p))
		if filepath.IsAbs(filepath.FromSlash(p)) || !within(s.Root, q) {
			bad = p
		}
		return q
	}
	m.Dir = abs(m.Dir)
	for _, list := range [][]Installed{m.Files, m.Extra} {
		for i := range list {
			list[i].Blob, list[i].Path = abs(list[i].Blob), abs(list[i].Path)
		}
	}
	if bad != "" {
		return nil, fmt.Errorf("manifest %s: expected paths inside the store, found %q", path, bad)
	}
	return &m, nil
}

// Lookup returns the manifest of an installed artifact, named by its
// repository ("" for a plain URL), commit and file names in order, when
// the artifact is complete: every blob present with its size and content
// (hashed again when its stamp no longer matches; see check) and every
// link still naming its blob. It returns false, without error, when the
// artifact is not complete, and an *AlteredError when a blob's content
// changed after it was verified.
func (s *Store) Lookup(repo, commit string, names []string) (*Manifest, bool, error) {
	if len(names) == 0 {
		return nil, false, errors.New("model store lookup: expected at least one file name, got none")
	}
	rel, err := artifactDir(repo, commit)
	if err != nil {
		return nil, false, err
	}
	bases := make([]string, len(names))
	for i, n := range names {
		if bases[i], err = baseName(n); err != nil {
			return nil, false, err
		}
	}
	m, err := s.readManifest(filepath.Join(s.manifestDir(), rel, bases[0]+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if len(m.Files) != len(bases) {
		return nil, false, nil
	}
	for i, in := range m.Files {
		if b, err := baseName(in.Name); err != nil || b != bases[i] {
			return nil, false, nil
		}
	}
	for _, in := range slices.Concat(m.Files, m.Extra) {
		if ok, err := s.intact(in); !ok || err != nil {
			return nil, false, err
		}
	}
	return m, true, nil
}

// intact reports whether an installed file's blob is present with its
// size and content and its link still names that blob. A blob whose stamp
// no longer matches is hashed again (see check); one whose content
// changed is an *AlteredError, left for Pull to replace.
func (s *Store) intact(in Installed) (bool, error) {
	if _, err := checkSHA256(in.Name, in.SHA256); err != nil || in.SHA256 == "" || in.Blob != s.blobPath(in.SHA256) {
		return false, nil
	}
	bi, err := s.lstat(in.Blob)
	if err != nil || !bi.Mode().IsRegular() || bi.Size() != in.Size {
		return false, nil
	}
	li, err := s.stat(in.Path)
	if err != nil || !os.SameFile(bi, li) {
		return false, nil
	}
	if err := s.check(context.Background(), in.SHA256, bi, nil); err != nil {
		return false, fmt.Errorf("%s: %w (headroom pull downloads it again)", in.Name, err)
	}
	return true, nil
}

// List returns the manifests of all installed artifacts, ordered by
// repository, commit and first file. It does not check that their files
// are intact; Lookup does.
func (s *Store) List() ([]Manifest, error) {
	var out []Manifest
	err := filepath.WalkDir(s.manifestDir(), func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") || !strings.HasSuffix(e.Name(), ".json") {
			return nil
		}
		m, err := s.readManifest(path)
		if err != nil {
			return err
		}
		out = append(out, *m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the model store %s: %w", s.Root, err)
	}
	slices.SortFunc(out, func(a, b Manifest) int {
		return cmp.Or(cmp.Compare(a.Repo, b.Repo), cmp.Compare(a.Commit, b.Commit), cmp.Compare(firstName(a), firstName(b)))
	})
	return out, nil
}

func firstName(m Manifest) string {
	if len(m.Files) == 0 {
		return ""
	}
	return m.Files[0].Name
}

// Contains reports whether an absolute path lies inside the store root,
// after resolving symbolic links in both, so that a link pointing out of
// the store does not count as inside. The root itself is not inside.
func (s *Store) Contains(path string) bool {
	if !filepath.IsAbs(path) {
		return false
	}
	root, err := resolve(s.Root)
	if err != nil {
		return false
	}
	p, err := resolve(path)
	if err != nil {
		return false
	}
	return within(root, p)
}

// resolve evaluates symbolic links in the longest existing prefix of an
// absolute path and appends the rest, cleaned.
func resolve(path string) (string, error) {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r, nil
	}
	path = filepath.Clean(path)
	var rest []string
	for dir := path; ; {
		parent := filepath.Dir(dir)
		if parent == dir {
			return path, nil
		}
		rest = append(rest, filepath.Base(dir))
		dir = parent
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			slices.Reverse(rest)
			return filepath.Join(append([]string{r}, rest...)...), nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
}
