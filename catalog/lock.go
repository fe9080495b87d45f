package catalog

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"

	"github.com/headroom-llm/headroom/source"
)

//go:embed lock.json
var lockJSON []byte

// LockVersion is the lock file format's version.
const LockVersion = 1

// LockFile pins catalog variants to immutable Hub content. Packages are
// keyed by (repository, commit, files): two references that resolve to the
// same files (a quant tag and a file name, or an entry's variant and
// another entry's draft) share one package and one copy of its planner
// inputs. Everything in it came from the Hub's answers; nothing is typed
// in by hand.
type LockFile struct {
	Version int      `json:"version"`
	About   []string `json:"about"`
	// Endpoint is the Hub the lock was resolved against.
	Endpoint string              `json:"endpoint,omitempty"`
	Packages map[string]*Package `json:"packages"`
	// Variants maps "ENTRY/QUANT" to what its reference resolved to.
	Variants map[string]*LockedVariant `json:"variants"`
}

// Package is one immutable artifact: a repository at a commit and the
// model's files (all shards, in order), with the planner inputs read from
// their headers.
type Package struct {
	Repo   string       `json:"repo"`
	Commit string       `json:"commit"`
	Files  []LockedFile `json:"files"`
	Inputs *Inputs      `json:"inputs"`
}

// LockedFile is a file as the Hub lists it: size and LFS sha256.
type LockedFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
}

// LockedVariant is one catalog variant's resolution.
type LockedVariant struct {
	// Ref is the catalog reference that was resolved; when the catalog's
	// reference changes, the lock entry no longer applies.
	Ref     string `json:"ref"`
	Package string `json:"package"`
	// Projector is the multimodal projector found beside the model, for
	// entries that declare one.
	Projector *LockedFile `json:"projector,omitempty"`
}

// Size is the package's total file size.
func (p *Package) Size() int64 {
	var n int64
	for _, f := range p.Files {
		n += f.Size
	}
	return n
}

// PackageID is the identity of an immutable package: repository, commit
// and first file.
func PackageID(repo, commit, file string) string { return repo + "@" + commit + "/" + file }

// VariantKey is the lock's key for a catalog variant.
func VariantKey(entry, quant string) string { return entry + "/" + quant }

// NewLockFile returns an empty lock.
func NewLockFile() *LockFile {
	return &LockFile{Version: LockVersion, About: lockAbout(), Packages: map[string]*Package{}, Variants: map[string]*LockedVariant{}}
}

func lockAbout() []string {
	return []string{
		"Written by 'headroom catalog lock' from the Hugging Face Hub's API and HTTP range reads of each file's GGUF header; never edited by hand.",
		"packages: one per (repository, commit, files), with sizes and sha256 (the LFS oid) as the Hub lists them and the planner inputs read from the headers.",
		"variants: each catalog variant ENTRY/QUANT, the reference it was resolved from, and its package. A variant absent here is planned from derived inputs (provenance: derived).",
	}
}

// LoadLock parses the embedded lock.
func LoadLock() (*LockFile, error) { return ParseLock(lockJSON) }

// ParseLock reads a lock file and checks its consistency.
func ParseLock(data []byte) (*LockFile, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var l LockFile
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("catalog lock: %w", err)
	}
	if l.Version != LockVersion {
		return nil, fmt.Errorf("catalog lock: version %d, this headroom reads %d", l.Version, LockVersion)
	}
	if l.Packages == nil {
		l.Packages = map[string]*Package{}
	}
	if l.Variants == nil {
		l.Variants = map[string]*LockedVariant{}
	}
	for id, p := range l.Packages {
		if !commitRE.MatchString(p.Commit) || len(p.Files) == 0 || p.Inputs == nil {
			return nil, fmt.Errorf("catalog lock: package %s needs a 40-hex commit, files and inputs", id)
		}
		if want := PackageID(p.Repo, p.Commit, p.Files[0].Name); id != want {
			return nil, fmt.Errorf("catalog lock: package %s should be keyed %s", id, want)
		}
		for _, f := range p.Files {
			if f.Size <= 0 || !sha256RE.MatchString(f.SHA256) {
				return nil, fmt.Errorf("catalog lock: package %s file %s needs a positive size and a sha256", id, f.Name)
			}
		}
	}
	for k, v := range l.Variants {
		if l.Packages[v.Package] == nil {
			return nil, fmt.Errorf("catalog lock: variant %s names package %s, which is not in the lock", k, v.Package)
		}
	}
	return &l, nil
}

// Lookup returns the package of a catalog variant, or nil when the
// variant was never locked or its reference changed since.
func (l *LockFile) Lookup(entry string, v Variant) (*Package, *LockedVariant) {
	if l == nil {
		return nil, nil
	}
	lv := l.Variants[VariantKey(entry, v.Quant)]
	if lv == nil || lv.Ref != v.Ref {
		return nil, nil
	}
	return l.Packages[lv.Package], lv
}

// Write writes the lock as indented JSON with sorted keys.
func (l *LockFile) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(l)
}

var (
	commitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)
	sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Lock resolves every variant of the entries through the Hub: the commit
// its revision names, each file's size and sha256 (the LFS oid), and the
// planner inputs from the headers, read with range requests. Two
// references that resolve to the same files share one package, whose
// inputs are read once. A variant the Hub cannot resolve, or whose files
// the Hub lists without a size or sha256, fails the lock: nothing is
// pinned that did not come from the Hub.
func Lock(ctx context.Context, client *source.Client, entries []Entry) (*LockFile, error) {
	l := NewLockFile()
	l.Endpoint = client.Endpoint
	// Resolve each distinct reference once.
	type resolved struct {
		pkg       string
		projector *LockedFile
	}
	byRef := map[string]resolved{}
	for _, e := range entries {
		for _, v := range e.Variants {
			key := VariantKey(e.ID, v.Quant)
			r, ok := byRef[v.Ref]
			if !ok {
				h, err := client.Open(ctx, v.Ref)
				if err != nil {
					return nil, fmt.Errorf("catalog lock: %s (%s): %w", key, v.Ref, err)
				}
				a := h.Artifact
				if !commitRE.MatchString(a.Commit) {
					return nil, fmt.Errorf("catalog lock: %s (%s): the Hub gave no commit", key, v.Ref)
				}
				p := &Package{Repo: a.Repo, Commit: a.Commit}
				names := make([]string, len(a.Files))
				for i, f := range a.Files {
					if f.Size <= 0 || !sha256RE.MatchString(f.SHA256) {
						return nil, fmt.Errorf("catalog lock: %s (%s): the Hub lists %s without a size and sha256; refusing to pin it", key, v.Ref, f.Name)
					}
					p.Files = append(p.Files, LockedFile{Name: f.Name, Size: f.Size, SHA256: f.SHA256})
					names[i] = f.Name
				}
				id := PackageID(p.Repo, p.Commit, p.Files[0].Name)
				if l.Packages[id] == nil {
					in, err := InputsOf(h.Model, names)
					if err != nil {
						return nil, fmt.Errorf("catalog lock: %s (%s): %w", key, v.Ref, err)
					}
					p.Inputs = in
					l.Packages[id] = p
				}
				r = resolved{pkg: id}
				if m := a.MMProj; m != nil {
					pf := &LockedFile{Name: m.Name, Size: max(m.Size, 0)}
					if sha256RE.MatchString(m.SHA256) {
						pf.SHA256 = m.SHA256
					}
					r.projector = pf
				}
				byRef[v.Ref] = r
			}
			lv := &LockedVariant{Ref: v.Ref, Package: r.pkg}
			if e.Projector != nil {
				if r.projector == nil {
					return nil, fmt.Errorf("catalog lock: %s (%s): the entry declares a projector but the repository has no mmproj file", key, v.Ref)
				}
				lv.Projector = r.projector
			}
			l.Variants[key] = lv
		}
	}
	return l, nil
}

// PackageIDs lists the lock's package ids, sorted.
func (l *LockFile) PackageIDs() []string {
	return slices.Sorted(maps.Keys(l.Packages))
}
