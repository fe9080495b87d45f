// Package source finds GGUF models and reads their headers, from a local
// file, a plain HTTP(S) URL or a Hugging Face repository, without
// downloading weights: remote headers come from at most two HTTP range
// requests per file and are cached on disk by (repo, commit, file).
package source

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Kind says where a model comes from.
type Kind string

// The kinds of reference.
const (
	KindLocal Kind = "local"
	KindURL   Kind = "url"
	KindHF    Kind = "hf"
)

// DefaultRevision is what an hf: reference without @REVISION reads.
const DefaultRevision = "main"

// RefForms describes the accepted references, for usage messages.
const RefForms = "a local path (model.gguf), an http:// or https:// URL, or hf:OWNER/REPO, " +
	"hf:OWNER/REPO:QUANT or hf:OWNER/REPO/PATH/FILE.gguf, each optionally followed by @REVISION"

// ErrBadRef is wrapped by every error ParseRef returns.
var ErrBadRef = errors.New("invalid model reference")

// Ref is a parsed model reference.
type Ref struct {
	// Raw is the reference as given.
	Raw  string
	Kind Kind
	// Path is the file path of a local reference.
	Path string
	// URL is the address of a URL reference.
	URL string
	// Repo is OWNER/NAME of a Hugging Face reference.
	Repo string
	// File is the path inside the repository, when the reference names one.
	File string
	// Tag is the quantization tag (e.g. Q4_K_M) of an hf:OWNER/REPO:QUANT
	// reference. With neither File nor Tag, the file is picked the way
	// llama.cpp's -hf OWNER/REPO picks it.
	Tag string
	// Revision is a branch, tag or commit; DefaultRevision when not given.
	Revision string
}

// String returns the reference in a form safe to print: URL user info and
// queries are masked.
func (r Ref) String() string {
	if r.Kind == KindURL {
		return redactURL(r.URL)
	}
	return r.Raw
}

var (
	schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)
	tagRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	commitRE = regexp.MustCompile(`^[0-9a-fA-F]{40}$`)
)

// ParseRef parses a model reference: a local path, an http:// or https://
// URL, or a Hugging Face reference hf:OWNER/REPO[/PATH/FILE.gguf | :QUANT][@REVISION].
func ParseRef(s string) (Ref, error) {
	bad := func(format string, args ...any) (Ref, error) {
		shown := s
		if schemeRE.MatchString(s) {
			shown = redactURL(s)
		}
		return Ref{}, fmt.Errorf("%w %q: %s; accepted forms: %s", ErrBadRef, shown, fmt.Sprintf(format, args...), RefForms)
	}
	if strings.TrimSpace(s) == "" {
		return bad("the reference is empty")
	}
	lower := strings.ToLower(s)
	switch {
	case strings.HasPrefix(lower, "hf://"):
		return bad("hf:// is not supported, write hf:OWNER/REPO without the slashes")
	case strings.HasPrefix(lower, "hf:"):
		return parseHF(s, s[len("hf:"):], bad)
	case strings.HasPrefix(lower, "http://"), strings.HasPrefix(lower, "https://"):
		u, err := url.Parse(s)
		if err != nil {
			return bad("the URL does not parse")
		}
		if u.Host == "" {
			return bad("the URL has no host")
		}
		if strings.Trim(u.Path, "/") == "" {
			return bad("the URL has no file path")
		}
		return Ref{Raw: s, Kind: KindURL, URL: s}, nil
	case schemeRE.MatchString(s):
		return bad("the scheme %q is not supported", s[:strings.Index(s, "://")])
	}
	return Ref{Raw: s, Kind: KindLocal, Path: s}, nil
}

func parseHF(raw, body string, bad func(string, ...any) (Ref, error)) (Ref, error) {
	r := Ref{Raw: raw, Kind: KindHF, Revision: DefaultRevision}
	// The revision is split off at the last '@' because branch names may
	// contain '/', while repo names and GGUF file names never contain '@'.
	if i := strings.LastIndexByte(body, '@'); i >= 0 {
		r.Revision = body[i+1:]
		body = body[:i]
		if err := checkRevision(r.Revision); err != "" {
			return bad("%s", err)
		}
		if commitRE.MatchString(r.Revision) {
			r.Revision = strings.ToLower(r.Revision)
		}
	}
	if i := strings.IndexByte(body, ':'); i >= 0 {
		r.Repo, r.Tag = body[:i], body[i+1:]
		if strings.Count(r.Repo, "/") != 1 {
			return bad("a quant tag follows OWNER/REPO, as in hf:OWNER/REPO:Q4_K_M; found %q before the ':'", r.Repo)
		}
		if !tagRE.MatchString(r.Tag) {
			return bad("the quant tag %q should be letters, digits, '_', '-' or '.', like Q4_K_M", r.Tag)
		}
	} else {
		parts := strings.SplitN(body, "/", 3)
		if len(parts) < 2 {
			return bad("expected OWNER/REPO after hf:, found %q", body)
		}
		r.Repo = parts[0] + "/" + parts[1]
		if len(parts) == 3 {
			r.File = parts[2]
			if err := checkRepoFile(r.File); err != "" {
				return bad("%s", err)
			}
		}
	}
	if !validRepoID(r.Repo) {
		return bad("%q is not a repository id: expected OWNER/NAME of letters, digits and '_', with single '-' or '.' between them", r.Repo)
	}
	return r, nil
}

// validRepoID applies the Hub's repository-name rule: letters, digits and
// '_', with '-', '.' and exactly one '/' only between them. Cache paths rely
// on it: such ids cannot contain "..", "--" or a separator other than '/'.
func validRepoID(id string) bool {
	if id == "" || len(id) > 256 {
		return false
	}
	slashes, afterSpecial := 0, true
	for _, c := range []byte(id) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
			afterSpecial = false
		case c == '/' || c == '-' || c == '.':
			if afterSpecial {
				return false
			}
			if c == '/' {
				slashes++
			}
			afterSpecial = true
		default:
			return false
		}
	}
	return !afterSpecial && slashes == 1
}

func checkRevision(rev string) string {
	switch {
	case rev == "":
		return "nothing follows '@': expected a branch, tag or commit"
	case len(rev) > 256:
		return "the revision is longer than 256 bytes"
	case strings.ContainsFunc(rev, func(c rune) bool { return c <= ' ' || c == 0x7f || c == '\\' }):
		return fmt.Sprintf("the revision %q contains spaces, control characters or '\\'", rev)
	}
	for _, seg := range strings.Split(rev, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Sprintf("the revision %q has an empty, '.' or '..' path segment", rev)
		}
	}
	return ""
}

func checkRepoFile(p string) string {
	if !strings.HasSuffix(strings.ToLower(p), ".gguf") {
		return fmt.Sprintf("the file %q in the repository should end in .gguf", p)
	}
	return checkRepoPath(p)
}

// checkRepoPath is the rule every file name from the Hub or from the user
// meets before any request names it: a relative path of plain segments,
// which no URL resolution can move out of the repository.
func checkRepoPath(p string) string {
	if strings.ContainsFunc(p, func(c rune) bool { return c < ' ' || c == 0x7f || c == '\\' }) {
		return fmt.Sprintf("the file %q contains control characters or '\\'", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Sprintf("the file %q has an empty, '.' or '..' path segment", p)
		}
	}
	return ""
}

// isCommit reports whether rev is a full commit hash, which names an
// immutable snapshot and can therefore be served from cache without asking
// the Hub.
func isCommit(rev string) bool { return commitRE.MatchString(rev) }

// redactURL masks a URL's user info and query, which may carry
// credentials (signed CDN URLs put them in the query).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	if u.RawQuery != "" {
		u.RawQuery = "REDACTED"
	}
	u.Fragment = ""
	return u.String()
}
