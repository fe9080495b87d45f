package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

var sha256RE = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// resolve returns the file listing of repo at rev, and the commit rev names.
// A full commit hash is looked up in the cache first, since what it names
// never changes; a branch or tag always asks the Hub, except offline.
func (o *op) resolve(ctx context.Context, repo, rev string) (*listing, error) {
	hc := o.cache()
	if hc.enabled() && isCommit(rev) {
		l, err := hc.loadListing(repo, rev)
		if err == nil {
			o.logf("%s@%s: file list from cache", repo, rev[:12])
			return l, nil
		}
		if !isMiss(err) {
			o.logf("ignoring unusable cache entry: %v", err)
		}
	}
	if o.c.Offline {
		return o.resolveOffline(repo, rev)
	}
	l, err := o.fetchListing(ctx, repo, rev)
	if err != nil {
		return nil, err
	}
	if hc.enabled() {
		if err := hc.storeListing(l); err != nil {
			o.logf("could not cache the file list of %s: %v", repo, err)
		}
		if rev != l.Commit {
			if err := hc.storeRef(repo, rev, l.Commit); err != nil {
				o.logf("could not cache revision %s of %s: %v", rev, repo, err)
			}
		}
	}
	return l, nil
}

func (o *op) resolveOffline(repo, rev string) (*listing, error) {
	hc := o.cache()
	if !hc.enabled() {
		return nil, fmt.Errorf("%w: offline mode needs the header cache, and no cache directory is set", ErrNotCached)
	}
	commit := rev
	if !isCommit(rev) {
		c, err := hc.loadRef(repo, rev)
		if err != nil {
			if isMiss(err) {
				return nil, fmt.Errorf("%w: offline mode, and revision %q of %s was never resolved online; run once without HF_HUB_OFFLINE", ErrNotCached, rev, repo)
			}
			return nil, fmt.Errorf("%w: offline mode, and the cached resolution of %s@%s is unusable: %v", ErrNotCached, repo, rev, err)
		}
		commit = c
		o.logf("offline: %s@%s was last resolved to commit %s", repo, rev, commit)
	}
	l, err := hc.loadListing(repo, commit)
	if err != nil {
		return nil, fmt.Errorf("%w: offline mode, and the file list of %s at commit %s is not cached (%v); run once without HF_HUB_OFFLINE",
			ErrNotCached, repo, commit, err)
	}
	return l, nil
}

// fetchListing asks the Hub which commit rev names and which files the
// repository holds there, with their sizes and LFS hashes.
func (o *op) fetchListing(ctx context.Context, repo, rev string) (*listing, error) {
	// The revision is one escaped segment even when a branch name has '/'.
	u := strings.TrimSuffix(o.endpoint.String(), "/") + "/api/models/" + repo + "/revision/" + url.PathEscape(rev) + "?blobs=true"
	o.logf("resolving %s@%s", repo, rev)
	h := http.Header{}
	h.Set("Accept", "application/json")
	resp, err := o.send(ctx, request{url: u, shown: u, header: h, count: o.countAPI})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, o.statusError(resp, u, repo, true)
	}
	l := &listing{Repo: repo}
	sha, err := decodeRevision(io.LimitReader(resp.Body, maxListing), func(s sibling) {
		if s.RFilename == "" {
			return
		}
		// A name that could climb out of the repository ("../x") is never
		// requested, whatever command reads the listing.
		if why := checkRepoPath(s.RFilename); why != "" {
			o.logf("%s@%s: ignoring a listed file: %s", repo, rev, why)
			return
		}
		f := listedFile{Path: s.RFilename, Size: -1}
		if s.Size != nil {
			f.Size = max(*s.Size, -1)
		}
		if s.LFS != nil {
			if s.LFS.Size != nil && f.Size < 0 {
				f.Size = max(*s.LFS.Size, -1)
			}
			oid := s.LFS.SHA256
			if oid == "" {
				oid = strings.TrimPrefix(s.LFS.OID, "sha256:")
			}
			if sha256RE.MatchString(oid) {
				f.SHA256 = strings.ToLower(oid)
			}
		}
		l.Files = append(l.Files, f)
	})
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("GET %s: expected the Hub's JSON description of the revision within %d MiB, found it longer or cut short: %w", u, maxListing>>20, err)
		}
		return nil, fmt.Errorf("GET %s: expected the Hub's JSON description of the revision (at most %d files): %w", u, maxListingEntries, err)
	}
	if !isCommit(sha) {
		return nil, fmt.Errorf("GET %s: expected a 40-hex commit in \"sha\", found %q", u, sha)
	}
	l.Commit = strings.ToLower(sha)
	if isCommit(rev) && rev != l.Commit {
		return nil, fmt.Errorf("GET %s: asked for commit %s, the Hub answered for %s", u, rev, l.Commit)
	}
	o.logf("%s@%s is commit %s (%d files)", repo, rev, l.Commit, len(l.Files))
	return l, nil
}

// escapeSegments escapes each '/'-separated segment of p.
func escapeSegments(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// resolveURL is where the Hub serves a file of a repository at a commit.
func (o *op) resolveURL(repo, commit, file string) string {
	return strings.TrimSuffix(o.endpoint.String(), "/") + "/" + repo + "/resolve/" + commit + "/" + escapeSegments(file)
}

// hubFile recognizes a URL of a file on the Hub endpoint,
// {endpoint}/{owner}/{name}/resolve/{revision}/{path}; only such URLs naming
// a commit can be cached, since only they name fixed content.
func (o *op) hubFile(u *url.URL) (repo, rev, file string, ok bool) {
	if origin(u) != origin(o.endpoint) {
		return "", "", "", false
	}
	base := strings.TrimSuffix(o.endpoint.Path, "/")
	rest, found := strings.CutPrefix(u.Path, base+"/")
	if !found {
		return "", "", "", false
	}
	parts := strings.SplitN(rest, "/", 5)
	if len(parts) != 5 || parts[2] != "resolve" || parts[4] == "" {
		return "", "", "", false
	}
	repo = parts[0] + "/" + parts[1]
	if !validRepoID(repo) {
		return "", "", "", false
	}
	return repo, parts[3], parts[4], true
}
