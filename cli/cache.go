package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/headroom-llm/headroom/internal/atomicfile"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/headroom-llm/headroom/hw"
)

// cacheDir is headroom's directory under the user's cache directory
// ($XDG_CACHE_HOME/headroom/SUB, else ~/.cache/headroom/SUB), as the header
// cache finds it; "" when the environment names neither, and nothing is
// cached.
func cacheDir(env Env, sub string) string {
	// XDG says a relative XDG_CACHE_HOME is invalid and must be ignored.
	if x := env.Getenv("XDG_CACHE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "headroom", sub)
	}
	if h := env.Getenv("HOME"); h != "" {
		return filepath.Join(h, ".cache", "headroom", sub)
	}
	return ""
}

// dirCache keeps one file per key in a directory. Writes go to a
// temporary file renamed into place, so a reader never sees half of one,
// and two processes writing one key leave one whole file. Failures are
// silent: a cache that cannot be written costs time, never an answer.
type dirCache struct {
	dir string
	// maxAge is how long an entry no run has rewritten is kept; 0 keeps
	// entries for good.
	maxAge time.Duration
}

// cacheMaxAge is how long an entry no run has rewritten is kept: entries
// are keyed by program build and machine, so old ones are for a program
// or a machine that is gone.
const cacheMaxAge = 30 * 24 * time.Hour

func (c dirCache) path(key string) string { return filepath.Join(c.dir, key+".json") }

// maxCacheEntry bounds one entry read: a recommend entry for the whole
// catalog is a few hundred KiB, and a file of gigabytes (or a FIFO in
// its place, which would block the reader) is refused at once.
const maxCacheEntry = 32 << 20

// Get reads an entry; a missing, oversized or irregular one (a FIFO, a
// device) is none, and is planned or measured again.
func (c dirCache) Get(key string) ([]byte, bool) {
	b, err := atomicfile.ReadFile(c.path(key), maxCacheEntry)
	return b, err == nil
}

func (c dirCache) Put(key string, data []byte) {
	if atomicfile.WriteFile(c.path(key), data) != nil {
		return
	}
	if c.maxAge > 0 {
		c.prune(time.Now().Add(-c.maxAge))
	}
}

// prune removes entries last written before cutoff.
func (c dirCache) prune(cutoff time.Time) {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
			os.Remove(filepath.Join(c.dir, e.Name()))
		}
	}
}

// version is the module version and VCS revision this program was built
// from, as the Go toolchain recorded them: "(devel)" for a build from a
// work tree, with the commit and whether the tree had changes.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information)"
	}
	return versionOf(bi)
}

// pseudoRevision is the commit prefix at the end of a pseudo-version
// (v0.0.0-20261202143928-118c2df44843), which go install records instead
// of VCS settings.
var pseudoRevision = regexp.MustCompile(`[-.]\d{14}-([0-9a-f]{12})(\+incompatible)?$`)

// versionOf says what bi records: the module version, then the revision
// from the VCS settings, from a pseudo-version, or that it is unknown (a
// build with -buildvcs=false, or outside a git checkout).
func versionOf(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, when string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	parts := []string{v}
	switch m := pseudoRevision.FindStringSubmatch(v); {
	case rev != "":
		r := "revision " + rev
		if dirty {
			r += " with uncommitted changes"
		}
		parts = append(parts, r)
	case m != nil:
		parts = append(parts, "revision "+m[1])
	case v == "(devel)":
		parts = append(parts, "revision unknown (built without VCS information)")
	}
	if when != "" {
		parts = append(parts, "committed "+when)
	}
	return strings.Join(parts, ", ") + ", " + bi.GoVersion
}

// buildID names this program for cache keys: its version, and the size
// and time of its executable, which change with every build even where
// the version does not (a work tree with changes, go run).
func buildID() string {
	id := version()
	if exe, err := os.Executable(); err == nil {
		if fi, err := os.Stat(exe); err == nil {
			id += fmt.Sprintf(" %s %d %d", exe, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return id
}

// maxBandwidthGBps is above every memory a machine has (HBM3e stacks of
// today's largest accelerators read about 8 TB/s): a kept figure above it
// was not measured.
const maxBandwidthGBps = 100_000

// bandwidthStore keeps bandwidth measurements as files named by a hash
// of the hardware they were taken on.
type bandwidthStore struct{ c dirCache }

func bandwidthKey(hardware string) string {
	sum := sha256.Sum256([]byte(hardware))
	return "bandwidth-" + hex.EncodeToString(sum[:16])
}

func (b bandwidthStore) Load(hardware string) (hw.Measured, bool) {
	data, ok := b.c.Get(bandwidthKey(hardware))
	if !ok {
		return hw.Measured{}, false
	}
	var kept struct {
		Hardware string `json:"hardware"`
		hw.Measured
	}
	if json.Unmarshal(data, &kept) != nil || kept.Hardware != hardware {
		return hw.Measured{}, false
	}
	// A kept figure no memory gives (not finite, not positive, above
	// any machine's) is measured again rather than believed.
	if g := kept.GBps; math.IsNaN(g) || math.IsInf(g, 0) || g <= 0 || g > maxBandwidthGBps {
		return hw.Measured{}, false
	}
	return kept.Measured, true
}

func (b bandwidthStore) Save(hardware string, m hw.Measured) {
	data, err := json.Marshal(struct {
		Hardware string `json:"hardware"`
		hw.Measured
	}{hardware, m})
	if err == nil {
		b.c.Put(bandwidthKey(hardware), data)
	}
}
