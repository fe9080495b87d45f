package store

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// ChecksumError means a downloaded file's sha256 differs from the expected
// one. The download was discarded and nothing was installed.
type ChecksumError struct {
	// File is the file's name in the artifact.
	File string
	// Want and Got are lowercase hex sha256 digests.
	Want, Got string
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("%s: expected sha256 %s, got %s; the download was discarded", e.File, e.Want, e.Got)
}

// SizeError means a file's size differs from the expected one, either as
// announced by the server or as received. The download was discarded.
type SizeError struct {
	File      string
	Want, Got int64
	// Announced says Got is what the server said it would send, not what
	// arrived.
	Announced bool
}

func (e *SizeError) Error() string {
	verb := "received"
	if e.Announced {
		verb = "the server announced"
	}
	return fmt.Sprintf("%s: expected %d bytes, %s %d; the download was discarded", e.File, e.Want, verb, e.Got)
}

// SpaceError means the disk holding the store has too little free space
// for a pull. It is returned before any byte is downloaded.
type SpaceError struct {
	// Dir is where the space was measured.
	Dir string
	// Need is how many bytes remain to be downloaded.
	Need int64
	// Reserve is the margin kept free on top of Need.
	Reserve int64
	// Free is how many bytes were available.
	Free int64
}

func (e *SpaceError) Error() string {
	return fmt.Sprintf("not enough free space in %s: expected %s to download plus %s kept free, found %s free",
		e.Dir, formatBytes(e.Need), formatBytes(e.Reserve), formatBytes(e.Free))
}

// HTTPError is a final answer from a server: a status that retrying will
// not change.
type HTTPError struct {
	File string
	// URL is the address asked for, without its query string, which may
	// carry a signature.
	URL        string
	StatusCode int
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("downloading %s from %s: expected 200 or 206, got %d %s",
		e.File, e.URL, e.StatusCode, http.StatusText(e.StatusCode))
}

// ErrUnreachable is what an UnreachableError matches with errors.Is.
var ErrUnreachable = errors.New("the network is unreachable")

// UnreachableError means a file's server could not be reached at all:
// its name did not resolve or no connection could be made. It is final,
// not retried: a pull downloads files and cannot work offline.
type UnreachableError struct {
	File string
	// URL is the address asked for, without its query string.
	URL string
	// Kept bytes of the file are on disk, resumed by the next pull.
	Kept int64
	Err  error
}

func (e *UnreachableError) Error() string {
	kept := ""
	if e.Kept > 0 {
		kept = fmt.Sprintf("; the %s already downloaded are kept and resumed", formatBytes(e.Kept))
	}
	return fmt.Sprintf("downloading %s from %s: %v (%v); a pull downloads the model's files and cannot work offline "+
		"(HF_HUB_OFFLINE=1 answers fit, plan and inspect from cached headers, never a pull): "+
		"connect to the network, or check the address and any proxy, then run the pull again%s",
		e.File, e.URL, ErrUnreachable, e.Err, kept)
}

// Is makes errors.Is(err, ErrUnreachable) hold.
func (e *UnreachableError) Is(target error) bool { return target == ErrUnreachable }

func (e *UnreachableError) Unwrap() error { return e.Err }

// redactURL returns a URL fit for messages: without user information,
// query or fragment, which may carry credentials or signatures.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.IndexAny(raw, "?#"); i >= 0 {
			raw = raw[:i]
		}
		if i := strings.LastIndex(raw, "@"); i >= 0 {
			raw = raw[i+1:]
		}
		return raw
	}
	u.User = nil
	u.RawQuery = ""
	u.ForceQuery = false
	u.Fragment = ""
	u.RawFragment = ""
	return u.String()
}
