package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/headroom-llm/headroom/gguf"
)

// remoteFile is one file to read over HTTP.
type remoteFile struct {
	name string
	url  string
	repo string
	hub  bool
	size int64     // expected size, -1 if unknown
	key  *cacheKey // nil when the file cannot be cached
}

func (o *op) openHF(ctx context.Context, r Ref) (*Header, error) {
	l, err := o.resolve(ctx, r.Repo, r.Revision)
	if err != nil {
		return nil, err
	}
	shards, mmproj, err := pickFiles(l, r)
	if err != nil {
		return nil, err
	}
	a := &Artifact{Ref: r.String(), Kind: KindHF, Repo: r.Repo, Revision: r.Revision, Commit: l.Commit, QuantTag: nameTag(shards[0].Path)}
	specs := make([]remoteFile, len(shards))
	for i, s := range shards {
		u := o.resolveURL(r.Repo, l.Commit, s.Path)
		specs[i] = remoteFile{name: s.Path, url: u, repo: r.Repo, hub: true, size: s.Size,
			key: &cacheKey{repo: r.Repo, commit: l.Commit, file: s.Path}}
		a.Files = append(a.Files, ArtifactFile{Name: s.Path, URL: u, Size: s.Size, SHA256: s.SHA256})
	}
	if mmproj != nil {
		a.MMProj = &ArtifactFile{Name: mmproj.Path, URL: o.resolveURL(r.Repo, l.Commit, mmproj.Path), Size: mmproj.Size, SHA256: mmproj.SHA256}
	}
	files, err := o.readAll(ctx, specs)
	if err != nil {
		return nil, err
	}
	for i, f := range files {
		a.Files[i].Size = f.Size
	}
	return o.finish(a, files)
}

func (o *op) openURL(ctx context.Context, r Ref) (*Header, error) {
	u, err := url.Parse(r.URL)
	if err != nil {
		return nil, fmt.Errorf("%w %q: the URL does not parse", ErrBadRef, r.String())
	}
	a := &Artifact{Ref: r.String(), Kind: KindURL, QuantTag: nameTag(path.Base(u.Path))}
	repo, rev, _, hub := o.hubFile(u)
	onHub := hub || origin(u) == origin(o.endpoint)
	if hub {
		a.Repo, a.Revision = repo, rev
		if isCommit(rev) {
			a.Commit = strings.ToLower(rev)
		}
	}
	urls := []*url.URL{u}
	if prefix, _, count, ok := gguf.SplitName(path.Base(u.Path)); ok && count > 1 {
		// Plain URLs have no listing: the other shards are assumed to sit
		// beside the named one, under llama.cpp's naming.
		urls = urls[:0]
		for i := 1; i <= count; i++ {
			s := *u
			s.Path = path.Join(path.Dir(u.Path), gguf.ShardName(prefix, i, count))
			s.RawPath = ""
			urls = append(urls, &s)
		}
	}
	specs := make([]remoteFile, len(urls))
	for i, su := range urls {
		specs[i] = remoteFile{name: path.Base(su.Path), url: su.String(), repo: repo, hub: onHub, size: -1}
		if srepo, srev, sfile, ok := o.hubFile(su); ok && isCommit(srev) {
			specs[i].key = &cacheKey{repo: srepo, commit: strings.ToLower(srev), file: sfile}
		}
	}
	files, err := o.readAll(ctx, specs)
	if err != nil {
		return nil, err
	}
	for i, f := range files {
		a.Files = append(a.Files, ArtifactFile{Name: specs[i].name, URL: redactURL(specs[i].url), Size: f.Size})
	}
	return o.finish(a, files)
}

func (o *op) openLocal(ctx context.Context, r Ref) (*Header, error) {
	paths := []string{r.Path}
	// Every file is checked before any is opened: a FIFO among the shards
	// would block the open of it for good.
	if _, err := statRegular(r.Path); err != nil {
		return nil, fmt.Errorf("opening model file: %w", err)
	}
	if prefix, no, count, ok := gguf.SplitName(filepath.Base(r.Path)); ok && count > 1 {
		paths = paths[:0]
		for i := 1; i <= count; i++ {
			p := filepath.Join(filepath.Dir(r.Path), gguf.ShardName(prefix, i, count))
			if _, err := statRegular(p); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil, fmt.Errorf("%s is shard %d of a %d-file split model, but shard %d is missing: %w", r.Path, no, count, i, err)
				}
				return nil, fmt.Errorf("%s is shard %d of a %d-file split model; shard %d: %w", r.Path, no, count, i, err)
			}
			paths = append(paths, p)
		}
	}
	a := &Artifact{Ref: r.Raw, Kind: KindLocal, QuantTag: nameTag(filepath.Base(paths[0]))}
	var files []*gguf.File
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f, err := readLocal(ctx, p, o.budget)
		if err != nil {
			return nil, err
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			abs = p
		}
		files = append(files, f)
		a.Files = append(a.Files, ArtifactFile{Name: filepath.Base(p), Path: abs, Size: f.Size})
	}
	return o.finish(a, files)
}

func (o *op) finish(a *Artifact, files []*gguf.File) (*Header, error) {
	m, err := gguf.NewModel(files...)
	if err != nil {
		return nil, fmt.Errorf("joining the files of %s: %w", a.Ref, err)
	}
	o.flushCache()
	if tag := FileTypeTag(m); tag != "" {
		a.QuantTag = tag
	}
	return &Header{Artifact: a, Model: m}, nil
}

// readAll reads the headers of files, a few at a time; a split model's
// shards are independent, so their round trips overlap. The first failure
// cancels the rest.
func (o *op) readAll(ctx context.Context, files []remoteFile) ([]*gguf.File, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]*gguf.File, len(files))
	errs := make([]error, len(files))
	sem := make(chan struct{}, parallelFiles)
	var wg sync.WaitGroup
	for i := range files {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				errs[i] = ctx.Err()
				return
			}
			out[i], errs[i] = o.readRemote(ctx, files[i])
			if errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	// Report the failure that caused the others, not the cancellations.
	var first error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return out, first
}

// readRemote parses one remote file's header, from the cache when it holds
// it, otherwise with range requests, caching the result.
func (o *op) readRemote(ctx context.Context, rf remoteFile) (*gguf.File, error) {
	hc := o.cache()
	if rf.key != nil && hc.enabled() {
		f, err := hc.loadHeader(ctx, *rf.key, o.budget)
		switch {
		case err == nil && (rf.size < 0 || f.Size == rf.size):
			o.mu.Lock()
			o.stats.CacheHits++
			o.mu.Unlock()
			o.logf("%s: header from cache", rf.name)
			return f, nil
		case err == nil:
			o.logf("ignoring cache entry for %s: it says %d bytes, the listing %d", rf.name, f.Size, rf.size)
		case errors.Is(err, gguf.ErrLimit):
			// Over the budget from the cache is over it from the network.
			return nil, fmt.Errorf("reading the GGUF header of %s: %w", rf.name, err)
		case !isMiss(err):
			o.logf("ignoring unusable cache entry: %v", err)
		}
	}
	if o.c.Offline {
		return nil, fmt.Errorf("%w: offline mode, and the header of %s is not cached; run once without HF_HUB_OFFLINE", ErrNotCached, rf.name)
	}
	o.logf("%s: reading header", rf.name)
	rr, err := o.openRange(ctx, rf.url, rf.repo, rf.hub)
	if err != nil {
		return nil, err
	}
	// One bound for the bytes the reader buffers and what the parser
	// keeps, over every file of the model: a parse held to 256 MiB could
	// otherwise sit on 256 MiB more of buffered header, and eight shards
	// on eight times that.
	rr.budget = o.budget
	f, err := gguf.ReadWith(rr, rr.Size(), gguf.Options{Budget: o.budget, Context: ctx})
	rr.Close()
	o.mu.Lock()
	o.stats.RangeRequests += rr.Requests()
	o.stats.BytesFetched += rr.BytesFetched()
	o.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("reading the GGUF header of %s: %w", rf.name, err)
	}
	if rf.size >= 0 && rf.size != f.Size {
		return nil, fmt.Errorf("%s: the Hub lists %d bytes, but the server holds %d; the listing and the file disagree", rf.name, rf.size, f.Size)
	}
	o.logf("%s: header is %d bytes, read with %d request(s)", rf.name, f.DataOffset, rr.Requests())
	if rf.key != nil && hc.enabled() {
		// Written once every file of the model has been read within the
		// budget (flushCache), so that a model refused half-way leaves
		// nothing in the cache.
		key, header := *rf.key, rr.prefix(f.DataOffset)
		o.mu.Lock()
		o.pending = append(o.pending, func() {
			if err := hc.storeHeader(key, f, header); err != nil {
				o.logf("could not cache the header of %s: %v", rf.name, err)
			}
		})
		o.mu.Unlock()
	}
	return f, nil
}

// flushCache writes the headers read over the network to the cache.
func (o *op) flushCache() {
	o.mu.Lock()
	pending := o.pending
	o.pending = nil
	o.mu.Unlock()
	for _, store := range pending {
		store()
	}
}
