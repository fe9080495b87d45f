package source

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/internal/httpretry"
)

// Defaults for NewClient.
const (
	DefaultEndpoint    = "https://huggingface.co"
	DefaultInitialRead = 4 << 20
	DefaultMaxHeader   = 256 << 20
	DefaultAttempts    = 3
	DefaultBackoff     = 500 * time.Millisecond
	DefaultTimeout     = httpretry.DefaultWindow
	DefaultMinBytes    = httpretry.DefaultMinBytes
	// DefaultDeadline bounds a whole Open: 256 MiB of headers at the
	// slowest rate allowed would take hours, and no header read should.
	DefaultDeadline = 10 * time.Minute
)

// parallelFiles bounds how many shards of a split model are read at once.
const parallelFiles = 4

// Client opens model references. Its fields may be changed after NewClient
// and before use, not while an Open runs; several Opens may run at once.
type Client struct {
	// HTTP sends all requests. Its Transport is wrapped so that Token goes
	// only to Endpoint's origin; a Timeout on it would cut off long header
	// streams, so prefer the Timeout field below.
	HTTP *http.Client
	// Endpoint is the Hugging Face Hub, from HF_ENDPOINT.
	Endpoint string
	// Token is sent as a bearer token to Endpoint only, from HF_TOKEN. It
	// never appears in errors or log lines.
	Token Secret
	// CacheDir holds cached headers; "" disables the cache.
	CacheDir string
	// InitialRead is how many bytes the first range request asks for.
	InitialRead int64
	// MaxHeader bounds how many header bytes are fetched per file.
	MaxHeader int64
	// MaxParse bounds the heap one Open's headers may take, every shard
	// of a split model and the bytes buffered to parse them included
	// (gguf.DefaultMaxAlloc when 0).
	MaxParse int64
	// Attempts is how many times a request is tried before giving up.
	Attempts int
	// Backoff is the wait before the first retry; it doubles each time.
	Backoff time.Duration
	// Timeout is the window in which each request must receive MinBytes
	// (waiting for the answer included); a server trickling bytes is cut
	// off after one window, not held on to forever.
	Timeout time.Duration
	// MinBytes is what each request must receive in every window of
	// Timeout (until it is complete).
	MinBytes int64
	// Deadline bounds a whole Open, retries included, and every request of
	// a RangeReader from OpenRange until its Close.
	Deadline time.Duration
	// Offline reads Hugging Face models from the cache only, never asking
	// the network (HF_HUB_OFFLINE=1).
	Offline bool
	// Log, if set, receives progress lines. Within one Open it is called
	// from one goroutine at a time.
	Log func(string)
}

// NewClient returns a Client configured from the environment, read through
// getenv (os.Getenv when nil): HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, and
// XDG_CACHE_HOME or HOME for the cache directory.
func NewClient(getenv func(string) string) *Client {
	if getenv == nil {
		getenv = os.Getenv
	}
	// A transport of its own keeps this client's connections and settings
	// apart from other users of http.DefaultTransport.
	var transport http.RoundTripper = http.DefaultTransport
	if t, ok := transport.(*http.Transport); ok {
		transport = t.Clone()
	}
	c := &Client{
		HTTP:        &http.Client{Transport: transport},
		Endpoint:    DefaultEndpoint,
		Token:       Secret(strings.TrimSpace(getenv("HF_TOKEN"))),
		InitialRead: DefaultInitialRead,
		MaxHeader:   DefaultMaxHeader,
		Attempts:    DefaultAttempts,
		Backoff:     DefaultBackoff,
		Timeout:     DefaultTimeout,
		MinBytes:    DefaultMinBytes,
		Deadline:    DefaultDeadline,
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
	// QuantTag is the quantization the header declares (general.file_type),
	// else the one the first file's name carries.
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
	// Size is in bytes; -1 for a projector the Hub gave no size for.
	Size int64 `json:"size"`
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
	// budget bounds the heap of every header this Open reads, all shards
	// and cache entries together (see WithBudget).
	budget *gguf.Budget
	// pending are the header cache writes waiting for the whole model
	// to be read (flushCache).
	pending []func()
}

func (c *Client) newOp() (*op, error) {
	if err := c.Token.check(); err != nil {
		return nil, err
	}
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
	hc.Transport = &authTransport{base: base, origin: origin(ep), token: string(c.Token)}
	// Loops and other schemes are refused as permanent errors, so that no
	// retry repeats them.
	own := hc.CheckRedirect
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := httpretry.CheckRedirect(req, via); err != nil {
			return err
		}
		if own != nil {
			return own(req, via)
		}
		return nil
	}
	return &op{c: c, hc: &hc, endpoint: ep}, nil
}

// budgetKey is the context key of WithBudget.
type budgetKey struct{}

// WithBudget makes every Open under ctx charge the headers it reads to b,
// so that one request reading several models (a model, its projector and
// its draft) is held to one bound rather than one per Open.
func WithBudget(ctx context.Context, b *gguf.Budget) context.Context {
	return context.WithValue(ctx, budgetKey{}, b)
}

// OneBudget returns ctx carrying one header budget of the Client's bound
// (MaxParse) for every Open under it, unless ctx carries one already: a
// request that reads a model, its projector and its draft is held to one
// bound in all.
func (c *Client) OneBudget(ctx context.Context) context.Context {
	if b, ok := ctx.Value(budgetKey{}).(*gguf.Budget); ok && b != nil {
		return ctx
	}
	return WithBudget(ctx, gguf.NewBudget(c.parseBudget()))
}

// budgetOf is the budget WithBudget put on ctx, or a new one of limit
// bytes for one Open.
func budgetOf(ctx context.Context, limit int64) *gguf.Budget {
	if b, ok := ctx.Value(budgetKey{}).(*gguf.Budget); ok && b != nil {
		return b
	}
	return gguf.NewBudget(limit)
}

// parseBudget is the heap one Open's headers may take, all files of the
// model together, the bytes buffered to parse them included.
func (c *Client) parseBudget() int64 {
	if c.MaxParse > 0 {
		return c.MaxParse
	}
	return gguf.DefaultMaxAlloc
}

// rate is what every request must move (see httpretry.Rate).
func (c *Client) rate() httpretry.Rate {
	return httpretry.Rate{MinBytes: c.MinBytes, Window: c.Timeout}
}

// withDeadline bounds ctx by the client's Deadline.
func (c *Client) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	d := c.Deadline
	if d <= 0 {
		d = DefaultDeadline
	}
	return context.WithTimeoutCause(ctx, d, fmt.Errorf("%w: not finished within %v (Client.Deadline)", ErrTimeout, d))
}

// Secret is a credential. It prints as [REDACTED], so that logging a
// Client, even with %+v or as JSON, cannot leak it.
type Secret string

// check refuses a token that no HTTP header can carry or that was pasted
// with a line break in it: net/http would refuse every request, and each
// refusal would be retried as if the network had failed. The error says
// where the bad byte is, never the token.
func (s Secret) check() error {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			what := "control character"
			switch {
			case c == ' ':
				what = "space"
			case c >= 0x80:
				what = "non-ASCII byte"
			}
			return fmt.Errorf("HF_TOKEN has a %s (0x%02x) at byte %d of %d; a Hugging Face token is printable ASCII on one line: set it again without it", what, c, i+1, len(s))
		}
	}
	return nil
}

// String returns [REDACTED], or "" when the secret is empty.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[REDACTED]"
}

// GoString keeps %#v from printing the secret.
func (s Secret) GoString() string { return `"` + s.String() + `"` }

// MarshalText keeps JSON and other encoders from writing the secret.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// redact removes the token from text bound for errors or logs.
func (c *Client) redact(s string) string {
	if c.Token == "" {
		return s
	}
	return strings.ReplaceAll(s, string(c.Token), "[REDACTED]")
}

// backoff is the wait before retry n (1-based): Backoff doubled each time,
// capped so that a misconfiguration cannot stall for hours.
func (c *Client) backoff(n int) time.Duration {
	return min(c.Backoff<<min(n-1, 16), 30*time.Second)
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
	o.budget = budgetOf(ctx, c.parseBudget())
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
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
	ctx, cancel := c.withDeadline(ctx)
	r, err := o.openRange(ctx, rawURL, repo, hub || origin(u) == origin(o.endpoint))
	if err != nil {
		cancel()
		return nil, c.redactErr(err)
	}
	r.release = cancel
	return r, nil
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
	if err == nil || c.Token == "" || !strings.Contains(err.Error(), string(c.Token)) {
		return err
	}
	return &redactedError{msg: c.redact(err.Error()), err: err}
}

// DownloadClient returns an HTTP client for fetching the files of artifacts
// this Client resolved: it sends Token to Endpoint's origin only, as every
// request of an Open does, so a redirect to a CDN never carries it.
func (c *Client) DownloadClient() (*http.Client, error) {
	o, err := c.newOp()
	if err != nil {
		return nil, err
	}
	return o.hc, nil
}
