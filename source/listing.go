package source

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/headroom-llm/headroom/internal/atomicfile"
	"io"
	"strings"
)

// Bounds on a repository's listing, fresh from the Hub or read back from
// the cache. The Hub recommends under 100k files per repository (its
// "Repository limitations and recommendations"), and GGUF repositories
// hold tens to a few hundred; a listing of more is refused rather than
// held in memory. Entries are decoded one at a time, so the bytes held
// are those of at most maxListingEntries entries, not of the whole
// answer.
const (
	maxListing        = 64 << 20
	maxListingEntries = 100_000
)

// errListingTooLong is what a listing over maxListingEntries entries
// wraps.
var errListingTooLong = errors.New("listing has too many entries")

// decodeObject reads one JSON object from dec, handing each member's
// value to field, which must consume it (skipValue for members it does
// not use).
func decodeObject(dec *json.Decoder, field func(name string) error) error {
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		if err := field(name); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	return err
}

// decodeArray reads a JSON array from dec one element at a time with
// elem, refusing more than limit elements before decoding the one past
// it; null counts as empty.
func decodeArray(dec *json.Decoder, limit int, elem func() error) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("expected an array, found %v", tok)
	}
	for n := 0; dec.More(); n++ {
		if n >= limit {
			return fmt.Errorf("%w: more than %d", errListingTooLong, limit)
		}
		if err := elem(); err != nil {
			return err
		}
	}
	_, err = dec.Token() // ']'
	return err
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("expected %q, found %v", want, tok)
	}
	return nil
}

// skipValue consumes one JSON value token by token, never holding more
// than the token being read.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

// sibling is one file of the Hub's revision answer.
type sibling struct {
	RFilename string `json:"rfilename"`
	Size      *int64 `json:"size"`
	LFS       *struct {
		SHA256 string `json:"sha256"`
		OID    string `json:"oid"`
		Size   *int64 `json:"size"`
	} `json:"lfs"`
}

// decodeRevision reads the Hub's answer to GET
// /api/models/{repo}/revision/{rev}?blobs=true: the commit, and each
// listed file handed to add as it is decoded.
func decodeRevision(r io.Reader, add func(sibling)) (sha string, err error) {
	dec := json.NewDecoder(r)
	err = decodeObject(dec, func(name string) error {
		switch name {
		case "sha":
			return dec.Decode(&sha)
		case "siblings":
			return decodeArray(dec, maxListingEntries, func() error {
				var s sibling
				if err := dec.Decode(&s); err != nil {
					return err
				}
				add(s)
				return nil
			})
		}
		return skipValue(dec)
	})
	return sha, err
}

// loadListing reads a cached listing back under the bounds of a fresh
// one, and checks every name, size and hash again as a fresh listing's
// are checked: the cache is a file anyone with the user's rights can
// edit, and a name it holds ends up in a URL sent with the token.
func (hc headerCache) loadListing(repo, commit string) (*listing, error) {
	p := hc.listingPath(repo, commit)
	fh, err := atomicfile.OpenNoBlock(p)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxListing {
		return nil, fmt.Errorf("cache entry %s: expected a regular file of at most %d MiB, found %s of %d bytes", p, maxListing>>20, fileKind(fi.Mode()), fi.Size())
	}
	var l listing
	dec := json.NewDecoder(io.LimitReader(fh, maxListing))
	err = decodeObject(dec, func(name string) error {
		switch name {
		case "repo":
			return dec.Decode(&l.Repo)
		case "commit":
			return dec.Decode(&l.Commit)
		case "files":
			return decodeArray(dec, maxListingEntries, func() error {
				var f listedFile
				if err := dec.Decode(&f); err != nil {
					return err
				}
				if why := checkListed(f); why != "" {
					return errors.New(why)
				}
				l.Files = append(l.Files, f)
				return nil
			})
		}
		return skipValue(dec)
	})
	if err != nil {
		return nil, fmt.Errorf("cache entry %s: %w", p, err)
	}
	if l.Repo != repo || l.Commit != commit {
		return nil, fmt.Errorf("cache entry %s: expected %s@%s, found %s@%s", p, repo, commit, l.Repo, l.Commit)
	}
	return &l, nil
}

// checkListed says what is wrong with a cached file entry, or "".
func checkListed(f listedFile) string {
	if why := checkRepoPath(f.Path); why != "" {
		return why
	}
	if f.Size < -1 {
		return fmt.Sprintf("the file %q has size %d", f.Path, f.Size)
	}
	if f.SHA256 != "" && (!sha256RE.MatchString(f.SHA256) || f.SHA256 != strings.ToLower(f.SHA256)) {
		return fmt.Sprintf("the file %q has sha256 %q, expected 64 lower-case hex digits", f.Path, f.SHA256)
	}
	return ""
}
