package source

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/headroom-llm/headroom/gguf"
)

// Defaults for NewClient.
const (
	DefaultEndpoint    = "https://huggingface.co"
	DefaultInitialRead = 4 << 20
	DefaultMaxHeader   = 256 << 20
	DefaultAttempts    = 3
	DefaultBackoff     = 500 * time.Millisecond
	DefaultTimeout     = 30 * time.Second
)

// parallelFiles bounds how many shards of a split model are read at once.
const parallelFiles = 4

// Client opens model references. Its fields may be changed after NewClient
// and before use; a Client must not be changed while Open runs.
type Client struct {
	// HTTP sends all requests. Its Transport is wrapped so that Token goes
	// only to Endpoint's origin; a Timeout on it would cut off long header
	// streams, so prefer the Timeout field below.
	HTTP *http.Client
	// Endpoint is the Hugging Face Hub, from HF_ENDPOINT.
	Endpoint string
	// Token is sent as a bearer token to Endpoint only, from HF_TOKEN. It
	// never appears in errors or log lines.
	Token string
	// CacheDir holds cached headers; "" disables the cache.
	CacheDir string
	// InitialRead is how many bytes the first range request asks for.
	InitialRead int64
	// MaxHeader bounds how many header bytes are fetched per file.
	MaxHeader int64
	// Attempts is how many times a request is tried before giving up.
	Attempts int
	// Backoff is the wait before the first retry; it doubles each time.
	Backoff time.Duration
	// Timeout is how long a request may go without receiving anything.
	Timeout time.Duration
	// Offline reads Hugging Face models from the cache only, never asking
	// the network (HF_HUB_OFFLINE=1).
	Offline bool
	// Log, if set, receives progress lines. It is called from one goroutine
	// at a time.
	Log func(string)
}

// NewClient returns a Client configured from the environment, read through
// getenv (os.Getenv when nil): HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, and
// XDG_CACHE_HOME or HOME for the cache directory.
func NewClient(getenv func(string) string) *Client {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := &Client{
		HTTP:        &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		Endpoint:    DefaultEndpoint,
		Token:       strings.TrimSpace(getenv("HF_TOKEN")),
		InitialRead: DefaultInitialRead,
		MaxHeader:   DefaultMaxHeader,
		Attempts:    DefaultAttempts,
		Backoff:     DefaultBackoff,
		Timeout:     DefaultTimeout,
	}
	if e := strings.TrimSpace(getenv("HF_ENDPOINT")); e != "" {
		c.Endpoint = strings.TrimRight(e, "/")
	}
	switch strings.ToLower(strings.TrimSpace(getenv("HF_HUB_OFFLINE"))) {
	case "1", "true", "yes", "on":
		c.Offline = true
	}
	// XDG says a relative XDG_CACHE_HOME is invalid and must be ignored.
	if x := getenv("XDG_CACHE_HOME"); filepath.IsAbs(x) {
		c.CacheDir = filepath.Join(x, "headroom", "headers")
	} else if h := getenv("HOME"); h != "" {
		c.CacheDir = filepath.Join(h, ".cache", "headroom", "headers")
	}
	return c
}

// Stats counts the work one Open did.
type Stats struct {
	// RangeRequests counts range requests sent, retries included.
	RangeRequests int `json:"range_requests"`
	// BytesFetched counts header bytes received.
	BytesFetched int64 `json:"bytes_fetched"`
	// APIRequests counts Hub API requests sent, retries included.
	APIRequests int `json:"api_requests"`
	// CacheHits counts headers parsed from the cache.
	CacheHits int `json:"cache_hits"`
}

// Header is an opened model: what it is and its parsed headers.
type Header struct {
	Artifact *Artifact
	// Model joins the headers of all shards.
	Model *gguf.Model
	Stats Stats
}

// Artifact identifies the files a verdict is about. It is printed by
// headroom inspect --json.
type Artifact struct {
	// Ref is the reference as given, with URL credentials masked.
	Ref      string `json:"ref"`
	Kind     Kind   `json:"kind"`
	Repo     string `json:"repo,omitempty"`
	Revision string `json:"revision,omitempty"`
	// Commit is the 40-hex commit the revision resolved to.
	Commit string `json:"commit,omitempty"`
	// QuantTag is the quantization named by the first file's name.
	QuantTag string `json:"quant_tag,omitempty"`
	// Files are the model's files; all shards, in order, for a split model.
	Files []ArtifactFile `json:"files"`
	// MMProj is the multimodal projector llama.cpp would load with the
	// model from the same repository. It is noted, not read.
	MMProj *ArtifactFile `json:"mmproj,omitempty"`
}

// ArtifactFile is one file of an artifact.
type ArtifactFile struct {
	// Name is the path inside the repository, or the file's base name.
	Name string `json:"name"`
	URL  string `json:"url,omitempty"`
	Path string `json:"path,omitempty"`
	Size int64  `json:"size"`
	// SHA256 is the hash the Hub lists for LFS files; empty when unknown.
	SHA256 string `json:"sha256,omitempty"`
}

// op is the state of one Open: the HTTP client with the token scoped to
// the endpoint, counters, and serialized logging.
type op struct {
	c        *Client
	hc       *http.Client
	endpoint *url.URL
	mu       sync.Mutex
	stats    Stats
}

func (c *Client) newOp() (*op, error) {
	ep, err := url.Parse(c.Endpoint)
	if err != nil || (ep.Scheme != "http" && ep.Scheme != "https") || ep.Host == "" || ep.RawQuery != "" {
		return nil, fmt.Errorf("Hugging Face endpoint %q (HF_ENDPOINT): expected an http:// or https:// URL without a query", redactURL(c.Endpoint))
	}
	hc := http.Client{}
	if c.HTTP != nil {
		hc = *c.HTTP
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &authTransport{base: base, origin: origin(ep), token: c.Token}
	return &op{c: c, hc: &hc, endpoint: ep}, nil
}

func (c *Client) timeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

// redact removes the token from text bound for errors or logs.
func (c *Client) redact(s string) string {
	if c.Token == "" {
		return s
	}
	return strings.ReplaceAll(s, c.Token, "[REDACTED]")
}

func (o *op) logf(format string, args ...any) {
	if o.c.Log == nil {
		return
	}
	msg := o.c.redact(fmt.Sprintf(format, args...))
	o.mu.Lock()
	defer o.mu.Unlock()
	o.c.Log(msg)
}

func (o *op) countAPI() {
	o.mu.Lock()
	o.stats.APIRequests++
	o.mu.Unlock()
}

func (o *op) cache() headerCache {
	limit := o.c.MaxHeader
	if limit <= 0 {
		limit = DefaultMaxHeader
	}
	return headerCache{dir: o.c.CacheDir, maxHeader: limit}
}

// Open resolves a reference (see ParseRef) and reads the headers of all
// its files.
func (c *Client) Open(ctx context.Context, ref string) (*Header, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	return c.OpenRef(ctx, r)
}

// OpenRef reads the headers of all files of a parsed reference.
func (c *Client) OpenRef(ctx context.Context, r Ref) (*Header, error) {
	o, err := c.newOp()
	if err != nil {
		return nil, err
	}
	var h *Header
	switch r.Kind {
	case KindLocal:
		h, err = o.openLocal(ctx, r)
	case KindURL:
		h, err = o.openURL(ctx, r)
	case KindHF:
		h, err = o.openHF(ctx, r)
	default:
		err = fmt.Errorf("%w: unknown kind %q", ErrBadRef, r.Kind)
	}
	if err != nil {
		return nil, c.redactErr(err)
	}
	h.Stats = o.stats
	return h, nil
}

// OpenRange opens a remote file for reading with range requests (see
// RangeReader), with the Client's token scoping, retries and timeouts.
// ctx governs all of the reader's requests.
func (c *Client) OpenRange(ctx context.Context, rawURL string) (*RangeReader, error) {
	o, err := c.newOp()
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%q: expected a URL: %w", redactURL(rawURL), err)
	}
	repo, _, _, hub := o.hubFile(u)
	r, err := o.openRange(ctx, rawURL, repo, hub || origin(u) == origin(o.endpoint))
	return r, c.redactErr(err)
}

// redactedError hides the token in a message while keeping the chain for
// errors.Is and errors.As.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func (c *Client) redactErr(err error) error {
	if err == nil || c.Token == "" || !strings.Contains(err.Error(), c.Token) {
		return err
	}
	return &redactedError{msg: c.redact(err.Error()), err: err}
}

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
	fi, err := os.Stat(r.Path)
	if err != nil {
		return nil, fmt.Errorf("opening model file: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s is a directory; expected a .gguf file", r.Path)
	}
	if prefix, no, count, ok := gguf.SplitName(filepath.Base(r.Path)); ok && count > 1 {
		paths = paths[:0]
		for i := 1; i <= count; i++ {
			p := filepath.Join(filepath.Dir(r.Path), gguf.ShardName(prefix, i, count))
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("%s is shard %d of a %d-file split model, but shard %d is missing: %w", r.Path, no, count, i, err)
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
		f, err := readLocal(p)
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

func readLocal(p string) (*gguf.File, error) {
	fh, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("opening model file: %w", err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("opening model file: %w", err)
	}
	f, err := gguf.Read(fh, fi.Size())
	if err != nil {
		return nil, fmt.Errorf("reading the GGUF header of %s: %w", p, err)
	}
	return f, nil
}

func (o *op) finish(a *Artifact, files []*gguf.File) (*Header, error) {
	m, err := gguf.NewModel(files...)
	if err != nil {
		return nil, fmt.Errorf("joining the files of %s: %w", a.Ref, err)
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
		f, err := hc.loadHeader(*rf.key)
		switch {
		case err == nil && (rf.size < 0 || f.Size == rf.size):
			o.mu.Lock()
			o.stats.CacheHits++
			o.mu.Unlock()
			o.logf("%s: header from cache", rf.name)
			return f, nil
		case err == nil:
			o.logf("ignoring cache entry for %s: it says %d bytes, the listing %d", rf.name, f.Size, rf.size)
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
	defer rr.Close()
	f, err := gguf.Read(rr, rr.Size())
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
		if err := hc.storeHeader(*rf.key, f, rr.prefix(f.DataOffset)); err != nil {
			o.logf("could not cache the header of %s: %v", rf.name, err)
		}
	}
	return f, nil
}
