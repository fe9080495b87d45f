package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/headroom-llm/headroom/internal/httpretry"
)

// Defaults that Open puts into a new Store.
const (
	DefaultAttempts = 5
	DefaultBackoff  = time.Second
	DefaultTimeout  = 60 * time.Second
	// DefaultMinBytes must arrive in every window of Timeout.
	DefaultMinBytes = httpretry.DefaultMinBytes
	// DefaultDeadline bounds one file's download, retries included: a
	// 100 GB model at 2 MB/s takes 14 hours.
	DefaultDeadline = 24 * time.Hour
	// DefaultReserve is kept free on the store's disk after a pull, so
	// that filling it with weights does not starve the rest of the system
	// (logs, llama-server's own files, the next temporary file).
	DefaultReserve int64 = 512 << 20
)

// Store is a model store rooted at a directory. Its fields may be changed
// after Open and before use, not while a Pull runs; several Pulls may run
// at once, also from several processes on the same root.
type Store struct {
	// Root is the store's absolute directory.
	Root string
	// HTTP sends all requests; it may carry an authenticating transport.
	// nil means http.DefaultClient. A Timeout on it would cut off long
	// downloads, so prefer the Timeout field below.
	HTTP *http.Client
	// Attempts is how many times in a row a download may fail
	// transiently (dropped connection, stall, 429, 5xx) before Pull gives
	// up; an attempt that got further into the file than any before
	// starts the count afresh.
	Attempts int
	// Backoff is the wait before the first retry; it doubles each time.
	Backoff time.Duration
	// Timeout is the window in which a download must receive MinBytes
	// (waiting for the answer included) before the attempt is given up
	// and retried; a stalled attempt does not count as progress.
	Timeout time.Duration
	// MinBytes is what must arrive in every window of Timeout.
	MinBytes int64
	// Deadline bounds one file's download, every attempt included.
	Deadline time.Duration
	// Progress, if set, is told about each file: at most about ten times
	// a second and once when the file is done. Concurrent Pulls on one
	// Store call it concurrently.
	Progress func(Progress)
	// Reserve is how many bytes must remain free after a pull; zero
	// keeps no margin.
	Reserve int64
	// Free reports the bytes available to this user on the filesystem
	// holding dir; nil means FreeBytes. An error wrapping
	// errors.ErrUnsupported skips the space check.
	Free func(dir string) (int64, error)

	// hardlink links a blob under its name; tests replace it to exercise
	// the symlink fallback.
	hardlink func(oldname, newname string) error
}

// File is one file to download.
type File struct {
	// Name is the file's path inside its repository, or its base name; it
	// is linked under its base name.
	Name string
	URL  string
	// Size is in bytes, or -1 when unknown.
	Size int64
	// SHA256 is the expected digest in hex, or "" when unknown: the file is
	// then installed under the digest it turns out to have, unverified.
	SHA256 string
}

// Artifact is what one Pull installs: a model's files (all shards of a
// split model, in order) and the extra files served with it.
type Artifact struct {
	// Ref is the reference the artifact was resolved from; it is recorded
	// in the manifest.
	Ref string
	// Repo is "owner/name" on the Hub, or "" for a plain URL.
	Repo string
	// Commit is the immutable revision, or "" when unknown.
	Commit string
	Files  []File
	// Extra holds the multimodal projector and draft model, if any.
	Extra []File
}

// DefaultRoot returns the store's default directory, read through getenv
// (os.Getenv when nil): $HEADROOM_STORE, else $XDG_DATA_HOME/headroom/store
// when XDG_DATA_HOME is absolute, else $HOME/.local/share/headroom/store.
// It returns "" when none of them is set.
func DefaultRoot(getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	if d := getenv("HEADROOM_STORE"); d != "" {
		return d
	}
	// XDG says a relative XDG_DATA_HOME is invalid and must be ignored.
	if x := getenv("XDG_DATA_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "headroom", "store")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "share", "headroom", "store")
	}
	return ""
}

// Open returns a Store rooted at root with the default settings, creating
// the directories of its layout.
func Open(root string) (*Store, error) {
	if root == "" {
		return nil, errors.New("model store: expected a root directory, got none (set HEADROOM_STORE or HOME)")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("model store %s: %w", root, err)
	}
	s := &Store{
		Root:     abs,
		Attempts: DefaultAttempts,
		Backoff:  DefaultBackoff,
		Timeout:  DefaultTimeout,
		MinBytes: DefaultMinBytes,
		Deadline: DefaultDeadline,
		Reserve:  DefaultReserve,
		Free:     FreeBytes,
	}
	// The root may be reached through links (the user chose it); nothing
	// below it is.
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("model store: creating %s: %w", abs, err)
	}
	for _, d := range []string{s.blobDir(), s.partDir(), s.lockDir(), s.modelDir(), s.manifestDir()} {
		if err := s.mkdirAll(d); err != nil {
			if ro := readOnly(err); ro != "" {
				return nil, fmt.Errorf("model store: the store at %s is %s: creating %s: %w", abs, ro, d, err)
			}
			return nil, fmt.Errorf("model store: creating %s: %w", d, err)
		}
	}
	return s, nil
}

func (s *Store) blobDir() string     { return filepath.Join(s.Root, "blobs", "sha256") }
func (s *Store) partDir() string     { return filepath.Join(s.Root, "partial") }
func (s *Store) lockDir() string     { return filepath.Join(s.Root, "locks") }
func (s *Store) modelDir() string    { return filepath.Join(s.Root, "models") }
func (s *Store) manifestDir() string { return filepath.Join(s.Root, "manifests") }

func (s *Store) blobPath(sum string) string { return filepath.Join(s.blobDir(), sum) }
func (s *Store) partPath(key string) string { return filepath.Join(s.partDir(), key+".part") }
func (s *Store) sidePath(key string) string { return filepath.Join(s.partDir(), key+".json") }
func (s *Store) lockPath(key string) string { return filepath.Join(s.lockDir(), key+".lock") }

// job is one file of a pull, checked and placed.
type job struct {
	file File
	// base is the name the file is linked under.
	base string
	// want is the expected digest in lowercase, or "".
	want string
	// key names the file's part and lock.
	key          string
	index, count int
}

// plan is a checked artifact: where it goes and its files in order.
type plan struct {
	a        Artifact
	dir      string // models/<repo>/<commit>
	manifest string // manifests/<repo>/<commit>/<first file>.json
	jobs     []job
	nFiles   int // jobs[:nFiles] are a.Files, the rest a.Extra
}

// prepare checks every name of an artifact and places its files.
func (s *Store) prepare(a Artifact) (*plan, error) {
	if len(a.Files) == 0 {
		return nil, fmt.Errorf("artifact %q: expected at least one file, got none", a.Ref)
	}
	rel, err := artifactDir(a.Repo, a.Commit)
	if err != nil {
		return nil, err
	}
	p := &plan{a: a, dir: filepath.Join(s.modelDir(), rel), nFiles: len(a.Files)}
	all := append(append([]File(nil), a.Files...), a.Extra...)
	seen := map[string]string{}
	for i, f := range all {
		base, err := baseName(f.Name)
		if err != nil {
			return nil, err
		}
		if other, dup := seen[base]; dup {
			return nil, fmt.Errorf("artifact %q: files %q and %q would both be linked as %s", a.Ref, other, f.Name, base)
		}
		seen[base] = f.Name
		want, err := checkSHA256(f.Name, f.SHA256)
		if err != nil {
			return nil, err
		}
		if f.URL != "" {
			if u, err := url.Parse(f.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, fmt.Errorf("%s: expected an http or https URL, got %q", f.Name, redactURL(f.URL))
			}
		}
		key := want
		if key == "" {
			if f.URL == "" {
				return nil, fmt.Errorf("%s: expected a URL or a sha256, got neither", f.Name)
			}
			h := sha256.Sum256([]byte(f.URL))
			key = "url-" + hex.EncodeToString(h[:16])
		}
		p.jobs = append(p.jobs, job{file: f, base: base, want: want, key: key, index: i + 1, count: len(all)})
	}
	p.manifest = filepath.Join(s.manifestDir(), rel, p.jobs[0].base+".json")
	if !within(s.Root, p.dir) || !within(s.Root, p.manifest) {
		return nil, fmt.Errorf("artifact %q: its directory %s would lie outside the store %s", a.Ref, p.dir, s.Root)
	}
	return p, nil
}

// artifactDir returns <repo>/<commit> relative to models/ or manifests/.
func artifactDir(repo, commit string) (string, error) {
	dirs, err := repoDirs(repo)
	if err != nil {
		return "", err
	}
	c, err := commitDir(commit)
	if err != nil {
		return "", err
	}
	return filepath.Join(append(dirs, c)...), nil
}

// Need returns how many bytes a Pull of a would still download: nothing
// for files whose blob is present, the rest of a file whose download was
// interrupted. Files of unknown size count as zero.
func (s *Store) Need(a Artifact) (int64, error) {
	p, err := s.prepare(a)
	if err != nil {
		return 0, err
	}
	return s.need(p)
}

func (s *Store) need(p *plan) (int64, error) {
	var total int64
	counted := map[string]bool{}
	for _, j := range p.jobs {
		if counted[j.key] || j.file.Size < 0 {
			continue
		}
		counted[j.key] = true
		if j.want != "" {
			// A blob that changed since it was verified may have to be
			// downloaded again: it counts until Pull hashes it.
			fi, err := s.lstat(s.blobPath(j.want))
			if err == nil && fi.Mode().IsRegular() && fi.Size() == j.file.Size {
				if st, ok := s.readStamp(j.want); ok && st == stampOf(j.want, fi) {
					continue
				}
			} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return 0, fmt.Errorf("%s: checking for blob: %w", j.file.Name, err)
			}
		}
		rest := j.file.Size
		if fi, err := s.lstat(s.partPath(j.key)); err == nil && fi.Mode().IsRegular() && fi.Size() <= rest {
			rest -= fi.Size()
		}
		total += rest
	}
	return total, nil
}

// checkSpace refuses a pull that would leave less than Reserve free.
func (s *Store) checkSpace(need int64) error {
	free := s.Free
	if free == nil {
		free = FreeBytes
	}
	avail, err := free(s.Root)
	if errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("model store: measuring free space in %s: %w", s.Root, err)
	}
	reserve := max(s.Reserve, 0)
	if need+reserve > avail {
		return &SpaceError{Dir: s.Root, Need: need, Reserve: reserve, Free: avail}
	}
	return nil
}

// Pull installs an artifact: it checks the free space before anything is
// downloaded, then downloads (resuming interrupted downloads) and verifies
// every file, links them under their names and writes the manifest. Files
// whose blob is already present are not downloaded again (their Installed
// says AlreadyPresent). The space check counts what Need counts, so files
// of unknown size are not in it. When ctx is cancelled, Pull returns
// promptly and keeps partial downloads for the next call.
func (s *Store) Pull(ctx context.Context, a Artifact) (*Manifest, error) {
	p, err := s.prepare(a)
	if err != nil {
		return nil, err
	}
	need, err := s.need(p)
	if err != nil {
		return nil, err
	}
	// With nothing to download, a full disk is no reason to refuse: the
	// pull writes only links and a manifest.
	if need > 0 {
		if err := s.checkSpace(need); err != nil {
			return nil, err
		}
	}
	got := make([]Installed, len(p.jobs))
	for i, j := range p.jobs {
		in, err := s.obtain(ctx, j, filepath.Join(p.dir, j.base))
		if err != nil {
			return nil, err
		}
		got[i] = in
	}
	m := &Manifest{
		Ref:         a.Ref,
		Repo:        a.Repo,
		Commit:      a.Commit,
		Dir:         p.dir,
		Files:       got[:p.nFiles],
		Extra:       got[p.nFiles:],
		InstalledAt: time.Now().UTC().Truncate(time.Second),
	}
	if len(m.Extra) == 0 {
		m.Extra = nil
	}
	if err := s.writeManifest(p.manifest, m); err != nil {
		return nil, err
	}
	return m, nil
}
