package source

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/headroom-llm/headroom/internal/httpretry"
)

// Errors that remote reads wrap, for errors.Is.
var (
	// ErrNoRangeSupport means a server answered a range request with the
	// whole file or without saying which bytes it sent.
	ErrNoRangeSupport = errors.New("server does not support range requests")
	// ErrTimeout means a server sent less than Client.MinBytes in a
	// window of Client.Timeout, or an Open outlasted Client.Deadline.
	ErrTimeout = errors.New("timed out")
	// ErrHeaderTooLarge means a header runs past Client.MaxHeader bytes.
	ErrHeaderTooLarge = errors.New("header too large")
	// ErrFileChanged means a remote file's size or ETag changed between
	// the requests that read its header.
	ErrFileChanged = errors.New("remote file changed while its header was read")
	// ErrUnreachable is a server whose name did not resolve or that
	// refused or never answered the connection: tried once, not retried.
	ErrUnreachable = errors.New("the network is unreachable")
)

// HTTPError is a response status that ended a request.
type HTTPError struct {
	StatusCode int
	// URL is the address asked for, with any credentials masked.
	URL string
	// Detail is the server's own message, when it gave a short one.
	Detail string
	// Hint says what the user can do about it.
	Hint string
}

func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("GET %s: expected a successful answer, got %d %s", e.URL, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// maxRetryAfter bounds how long a Retry-After may make us wait; a server
// asking for more is treated as down.
const maxRetryAfter = 60 * time.Second

// authTransport adds the Hugging Face token to requests for the endpoint's
// own origin and strips Authorization from every other request. It sits
// under http.Client so that it also sees each redirect hop: Go forwards
// Authorization to subdomains and to other ports of the same host, and the
// Hub redirects file reads to CDN hosts that must not see the token.
type authTransport struct {
	base   http.RoundTripper
	origin string // scheme://host:port of the endpoint
	token  string
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	send := t.token != "" && origin(req.URL) == t.origin
	if !send && req.Header.Get("Authorization") == "" {
		return t.base.RoundTrip(req)
	}
	// A RoundTripper must not modify the caller's request.
	r := req.Clone(req.Context())
	if send {
		r.Header.Set("Authorization", "Bearer "+t.token)
	} else {
		r.Header.Del("Authorization")
	}
	return t.base.RoundTrip(r)
}

// origin returns scheme://host:port with the default port made explicit,
// so that https://h and https://h:443 compare equal.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	switch {
	case port != "":
	case scheme == "http":
		port = "80"
	case scheme == "https":
		port = "443"
	}
	return scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// watchedBody counts a response's bytes for its rate guard and stops the
// guard on Close.
type watchedBody struct {
	io.ReadCloser
	ctx context.Context
	g   *httpretry.Guard
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.g.Add(n)
	}
	if err != nil && err != io.EOF {
		if cause := context.Cause(b.ctx); errors.Is(cause, ErrTimeout) {
			err = cause
		}
	}
	return n, err
}

func (b *watchedBody) Close() error {
	err := b.ReadCloser.Close()
	b.g.Stop()
	return err
}

// request describes one GET for send.
type request struct {
	url    string
	shown  string // url as it may be printed
	header http.Header
	// count is called once per attempt actually sent.
	count func()
}

// send issues a GET, retrying transient failures (a connection that
// broke, timeouts, 408, 429 and 5xx) with exponential backoff; a redirect
// loop, a redirect to another scheme, a certificate error and a server
// that cannot be reached at all (ErrUnreachable) are final. The
// response returned has any status; its body is held to the client's
// minimum rate while it is read and must be closed.
func (o *op) send(ctx context.Context, rq request) (*http.Response, error) {
	attempts := max(o.c.Attempts, 1)
	what := "GET " + rq.shown
	if r := rq.header.Get("Range"); r != "" {
		what += " (" + r + ")"
	}
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", what, context.Cause(ctx))
		}
		actx, wd := o.c.rate().Watch(ctx, func(e error) error { return fmt.Errorf("%w: %w", ErrTimeout, e) })
		req, err := http.NewRequestWithContext(actx, http.MethodGet, rq.url, nil)
		if err != nil {
			wd.Stop()
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		for k, v := range rq.header {
			req.Header[k] = v
		}
		req.Header.Set("User-Agent", "headroom (+https://github.com/headroom-llm/headroom)")
		if rq.count != nil {
			rq.count()
		}
		resp, err := o.hc.Do(req)
		var wait time.Duration
		switch {
		case err != nil:
			wd.Stop()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%s: %w", what, context.Cause(ctx))
			}
			err = transportError(actx, err)
			if httpretry.Unreachable(err) {
				return nil, fmt.Errorf("%s: %w (%w); for a Hugging Face model, HF_HUB_OFFLINE=1 answers from the headers cached by earlier runs", what, ErrUnreachable, err)
			}
			var cert *tls.CertificateVerificationError
			if errors.As(err, &cert) || httpretry.IsPermanent(err) || attempt >= attempts {
				return nil, fmt.Errorf("%s: gave up after %d attempt(s): %w", what, attempt, err)
			}
			o.logf("%s failed (%v); retrying", what, err)
		case httpretry.Transient(resp.StatusCode):
			ra, hasRA := httpretry.RetryAfter(resp.Header.Get("Retry-After"))
			io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			wd.Stop()
			status := fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
			if hasRA && ra > maxRetryAfter {
				return nil, fmt.Errorf("%s: the server answered %s and asked to retry after %v; try again later", what, status, ra)
			}
			if attempt >= attempts {
				return nil, fmt.Errorf("%s: gave up after %d attempts, the last answered %s", what, attempt, status)
			}
			wait = ra
			o.logf("%s answered %s; retrying", what, status)
		default:
			resp.Body = &watchedBody{ReadCloser: resp.Body, ctx: actx, g: wd}
			return resp, nil
		}
		if err := httpretry.Sleep(ctx, max(wait, o.c.backoff(attempt))); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
}

// transportError replaces a watchdog's cancellation with its cause and
// drops url.Error's URL, which after a redirect is a signed CDN address.
func transportError(actx context.Context, err error) error {
	if cause := context.Cause(actx); errors.Is(cause, ErrTimeout) {
		return cause
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// statusError explains a final non-success answer. hub says the address is
// on the Hugging Face endpoint, where the token is sent and gated or
// private repositories are the usual cause of 401, 403 and 404.
func (o *op) statusError(resp *http.Response, shown, repo string, hub bool) error {
	e := &HTTPError{StatusCode: resp.StatusCode, URL: shown, Detail: o.errorDetail(resp)}
	hasToken := o.c.Token != ""
	what := "the file"
	if repo != "" {
		what = "repository " + repo
	}
	switch code := resp.StatusCode; {
	case hub && code == http.StatusUnauthorized && hasToken:
		e.Hint = "the token in HF_TOKEN was rejected; check that it is valid and not expired"
	case hub && code == http.StatusUnauthorized:
		e.Hint = what + " is private or gated (or does not exist); set HF_TOKEN to an access token of an account allowed to read it"
	case hub && code == http.StatusForbidden && hasToken:
		e.Hint = what + " is gated and the account of HF_TOKEN has no access yet: accept its terms on the model page, or use a token with read access"
	case hub && code == http.StatusForbidden:
		e.Hint = what + " is gated: accept its terms on the model page and set HF_TOKEN to an access token of that account"
	case hub && code == http.StatusNotFound && !hasToken:
		e.Hint = what + " or the revision does not exist, or is private: check the name, or set HF_TOKEN"
	case hub && code == http.StatusNotFound:
		e.Hint = what + " or the revision does not exist, or HF_TOKEN's account cannot see it"
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		e.Hint = "the server refused access; headroom sends HF_TOKEN only to the Hugging Face endpoint (HF_ENDPOINT)"
	case code == http.StatusNotFound:
		e.Hint = "check the URL"
	}
	return e
}

// errorDetail extracts a short message from an error body: the Hub's JSON
// {"error": ...} or a line of plain text, never HTML, never the token.
func (o *op) errorDetail(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	ct := resp.Header.Get("Content-Type")
	var msg string
	switch {
	case strings.Contains(ct, "json"):
		var v struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &v) == nil {
			msg = v.Error
		}
	case strings.HasPrefix(ct, "text/plain"):
		msg = string(b)
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return o.c.redact(msg)
}
