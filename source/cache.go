package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/headroom-llm/headroom/internal/atomicfile"
	"io"
	"io/fs"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/headroom-llm/headroom/gguf"
)

// ErrNotCached means offline mode needed something the cache does not hold.
var ErrNotCached = errors.New("not in the header cache")

// headerCache stores, under dir:
//
//	OWNER--NAME/COMMIT/listing.json   the repository's files at COMMIT
//	OWNER--NAME/COMMIT/HASH.hdr       one file's raw header, HASH naming the file
//	OWNER--NAME/refs/REVISION         the commit REVISION last resolved to
//
// Entries are keyed by commit, which names immutable content, so they never
// go stale; only refs change, and they are only read offline. Repository
// ids are validated (validRepoID), so "--" cannot be ambiguous and no path
// can escape dir.
type headerCache struct {
	dir       string
	maxHeader int64
}

// cacheKey names one file of a repository at one commit.
type cacheKey struct {
	repo, commit, file string
}

func (k cacheKey) String() string { return k.repo + "@" + k.commit + "/" + k.file }

func (hc headerCache) enabled() bool { return hc.dir != "" }

func (hc headerCache) repoDir(repo string) string {
	return filepath.Join(hc.dir, strings.Replace(repo, "/", "--", 1))
}

func (hc headerCache) headerPath(k cacheKey) string {
	sum := sha256.Sum256([]byte(k.file))
	return filepath.Join(hc.repoDir(k.repo), k.commit, hex.EncodeToString(sum[:16])+".hdr")
}

// An entry file is: magic, version, file size, data offset, key length and
// key, header length, the header's SHA-256, then the header bytes. The
// checksum turns a torn or tampered entry into a miss instead of a wrong
// answer.
const (
	entryMagic   = "HRHC"
	entryVersion = 1
)

// storeHeader saves the header bytes (the file's first bytes, up to its data
// region) of a parsed file.
func (hc headerCache) storeHeader(k cacheKey, f *gguf.File, header []byte) error {
	key := k.String()
	var b bytes.Buffer
	b.Grow(len(header) + len(key) + 80)
	b.WriteString(entryMagic)
	sum := sha256.Sum256(header)
	for _, v := range []any{uint32(entryVersion), f.Size, f.DataOffset, uint32(len(key))} {
		binary.Write(&b, binary.LittleEndian, v)
	}
	b.WriteString(key)
	binary.Write(&b, binary.LittleEndian, uint64(len(header)))
	b.Write(sum[:])
	b.Write(header)
	return atomicfile.WriteFile(hc.headerPath(k), b.Bytes())
}

// loadHeader parses a cached header. A missing entry gives an error wrapping
// fs.ErrNotExist; any other error means the entry is unusable.
func (hc headerCache) loadHeader(ctx context.Context, k cacheKey, budget *gguf.Budget) (*gguf.File, error) {
	f, _, err := hc.loadEntry(ctx, k, budget)
	return f, err
}

// loadEntry is loadHeader that also gives the header's bytes. The entry's
// bytes and the parse of them are charged to budget (a fresh one of the
// header bound when nil).
func (hc headerCache) loadEntry(ctx context.Context, k cacheKey, budget *gguf.Budget) (*gguf.File, []byte, error) {
	if budget == nil {
		budget = gguf.NewBudget(hc.maxHeader)
	}
	p := hc.headerPath(k)
	fh, err := atomicfile.OpenNoBlock(p)
	if err != nil {
		return nil, nil, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > hc.maxHeader+4096 {
		return nil, nil, fmt.Errorf("cache entry %s: expected a regular file of at most %d bytes, found %s of %d bytes", p, hc.maxHeader+4096, fileKind(fi.Mode()), fi.Size())
	}
	if err := budget.Charge(fi.Size()); err != nil {
		return nil, nil, fmt.Errorf("cache entry %s: %w", p, err)
	}
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(fh, data); err != nil {
		return nil, nil, fmt.Errorf("cache entry %s: %w", p, err)
	}
	bad := func(format string, args ...any) (*gguf.File, []byte, error) {
		return nil, nil, fmt.Errorf("cache entry %s: %s", p, fmt.Sprintf(format, args...))
	}
	r := bytes.NewReader(data)
	var fixed struct {
		Magic      [4]byte
		Version    uint32
		Size       int64
		DataOffset int64
		KeyLen     uint32
	}
	if binary.Read(r, binary.LittleEndian, &fixed) != nil {
		return bad("expected at least 28 bytes, found %d", len(data))
	}
	if string(fixed.Magic[:]) != entryMagic || fixed.Version != entryVersion {
		return bad("expected magic %q version %d, found %q version %d", entryMagic, entryVersion, fixed.Magic[:], fixed.Version)
	}
	if int64(fixed.KeyLen) > int64(r.Len()) {
		return bad("key length %d exceeds the entry", fixed.KeyLen)
	}
	key := make([]byte, fixed.KeyLen)
	io.ReadFull(r, key)
	if string(key) != k.String() {
		return bad("expected key %q, found %q", k.String(), key)
	}
	var hdrLen uint64
	var sum [32]byte
	if binary.Read(r, binary.LittleEndian, &hdrLen) != nil || binary.Read(r, binary.LittleEndian, &sum) != nil {
		return bad("truncated before the header")
	}
	if hdrLen != uint64(r.Len()) || int64(hdrLen) > fixed.DataOffset || fixed.DataOffset > fixed.Size {
		return bad("header length %d, data offset %d and file size %d are inconsistent with %d bytes left",
			hdrLen, fixed.DataOffset, fixed.Size, r.Len())
	}
	header := data[len(data)-r.Len():]
	if sha256.Sum256(header) != sum {
		return bad("header checksum mismatch")
	}
	f, err := gguf.ReadWith(headerBytes{b: header, size: fixed.Size}, fixed.Size, gguf.Options{Budget: budget, Context: ctx})
	if err != nil {
		return nil, nil, fmt.Errorf("cache entry %s: does not parse: %w", p, err)
	}
	if f.DataOffset != fixed.DataOffset {
		return bad("parses with data offset %d, expected %d", f.DataOffset, fixed.DataOffset)
	}
	return f, header, nil
}

// headerBytes serves a cached header as the file it came from: the stored
// bytes, then zeros up to the file's size. The parser reads ahead in chunks
// but never uses bytes past the header, so the zeros stand in for tensor
// data it does not look at, and every read can be served in full.
type headerBytes struct {
	b    []byte
	size int64
}

func (h headerBytes) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read at negative offset %d", off)
	}
	if off >= h.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), h.size-off))
	c := 0
	if off < int64(len(h.b)) {
		c = copy(p[:n], h.b[off:])
	}
	clear(p[c:n])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (hc headerCache) listingPath(repo, commit string) string {
	return filepath.Join(hc.repoDir(repo), commit, "listing.json")
}

func (hc headerCache) storeListing(l *listing) error {
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(hc.listingPath(l.Repo, l.Commit), data)
}

func (hc headerCache) refPath(repo, rev string) string {
	return filepath.Join(hc.repoDir(repo), "refs", url.PathEscape(rev))
}

func (hc headerCache) storeRef(repo, rev, commit string) error {
	return atomicfile.WriteFile(hc.refPath(repo, rev), []byte(commit+"\n"))
}

func (hc headerCache) loadRef(repo, rev string) (string, error) {
	p := hc.refPath(repo, rev)
	fh, err := atomicfile.OpenNoBlock(p)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	if fi, err := fh.Stat(); err != nil {
		return "", err
	} else if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("cache entry %s: expected a regular file, found %s", p, fileKind(fi.Mode()))
	}
	// A commit and a newline; anything longer is not one of ours.
	data, err := io.ReadAll(io.LimitReader(fh, 128))
	if err != nil {
		return "", err
	}
	commit := strings.TrimSpace(string(data))
	if !isCommit(commit) {
		return "", fmt.Errorf("cache entry %s: expected a 40-hex commit, found %q", p, commit)
	}
	return strings.ToLower(commit), nil
}

// isMiss tells a missing cache entry from an unusable one.
func isMiss(err error) bool { return errors.Is(err, fs.ErrNotExist) }
