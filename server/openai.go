package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/headroom-llm/headroom/source"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"time"

	"github.com/headroom-llm/headroom/admission"
)

// The OpenAI-compatible endpoints headroom forwards to the model a
// request's body names, loading it first when it is not loaded; with
// llama-server's rerank endpoint (Jina's and Cohere's request shape),
// which an embedding model's server answers when its plan has --rerank.
var openAIPaths = []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/rerank", "/v1/reranking"}

// newUpstream is the client that forwards to the children: they are on
// loopback, answer as they compute, and must never be reached through a
// proxy from the environment.
//
// llama-server (cpp-httplib) closes a connection idle for 5 s
// (CPPHTTPLIB_KEEPALIVE_TIMEOUT_SECOND in the pinned build), so idle
// connections are dropped here first, at 4 s: one taken from the pool as
// the child closes it fails the request ("server closed idle
// connection"), which 12 of 200 concurrent streams did before.
func newUpstream() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     childIdleConn,
	}}
}

// childIdleConn is how long a connection to a child may stay idle.
const childIdleConn = 4 * time.Second

// openAI answers one of openAIPaths: it reads the body (the API's limit),
// finds its model, waits for the pool to have it loaded, and streams the
// child's answer back as it comes.
func (s *server) openAI(path string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if _, err := parseQuery(r); err != nil {
			return err
		}
		if s.cfg.Pool == nil {
			return noRuntime(r, "serve")
		}
		body, err := readBody(w, r)
		if err != nil {
			return err
		}
		var head struct {
			Model  string          `json:"model"`
			Stream json.RawMessage `json:"stream"`
		}
		if err := json.Unmarshal(body, &head); err != nil {
			return withStatus(http.StatusBadRequest, err, "body must be one JSON object")
		}
		if head.Model == "" {
			return badRequest("model is required: a name GET /v1/models lists")
		}
		var ev *eventStream
		var onWait func(Progress)
		if string(head.Stream) == "true" {
			ev = &eventStream{w: w, model: head.Model, stall: s.writeStall(), start: time.Now()}
			onWait = ev.progress
		}
		child, release, err := s.cfg.Pool.acquireWith(r.Context(), head.Model, onWait)
		if err != nil {
			err = poolError(w, head.Model, err)
			if ev.begun() {
				// The stream has begun: the failure is its last event.
				ev.fail(r, err)
				return nil
			}
			return err
		}
		defer release()
		err = forward(w, r, s.upstream, child.URL()+path, body, s.writeStall(), ev.begun())
		if err != nil && ev.begun() && r.Context().Err() == nil {
			// The child did not answer a stream that has begun.
			ev.fail(r, err)
			return nil
		}
		return err
	}
}

// readBody reads a body of at most maxBody bytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > maxBody {
		return nil, &apiError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("body is %d bytes, larger than the %d allowed", r.ContentLength, maxBody)}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, &apiError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("body is larger than %d bytes", tooBig.Limit)}
	case err != nil:
		return nil, withStatus(http.StatusBadRequest, err, "reading the body")
	case len(bytes.TrimSpace(body)) == 0:
		return nil, badRequest("body is empty; want a JSON object")
	}
	return body, nil
}

// poolError gives a failure to get a model loaded its status: 503 when
// there is no room (with the reason) or too many wait, 404 for a model
// not served, 400 for a name that is no reference, 502 when its server
// failed to start.
func poolError(w http.ResponseWriter, model string, err error) error {
	var (
		busy    *Busy
		noRoom  *NoRoom
		refused *Refused
		adm     *admission.Refusal
	)
	switch {
	case errors.As(err, &busy):
		w.Header().Set("Retry-After", strconv.Itoa(int(busy.RetryAfter.Seconds())))
		return &apiError{status: http.StatusServiceUnavailable, msg: busy.Error(), err: err, code: CodeQueueFull}
	case errors.As(err, &noRoom), errors.As(err, &refused), errors.As(err, &adm):
		return &apiError{status: http.StatusServiceUnavailable, msg: err.Error(), err: err, code: CodeInsufficientMemory}
	case errors.Is(err, ErrUnknownModel), errors.Is(err, fs.ErrNotExist):
		return withStatus(http.StatusNotFound, err, "model %q", model).withCode(CodeModelNotFound)
	case errors.Is(err, ErrForbidden):
		return withStatus(http.StatusForbidden, err, "model %q", model)
	case errors.Is(err, source.ErrBadRef):
		// As /api/load answers it: the request named no model at all.
		return withStatus(http.StatusBadRequest, err, "model %q", model)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return withStatus(http.StatusBadGateway, err, "loading %s", model).withCode(CodeLoadFailed)
}

// DefaultWriteStall is how long one write of an answer may wait for the
// client to read (Config.WriteStall).
const DefaultWriteStall = 20 * time.Second

func (s *server) writeStall() time.Duration {
	if s.cfg.WriteStall > 0 {
		return s.cfg.WriteStall
	}
	return DefaultWriteStall
}

// forward posts body to url and copies the answer back, flushing each
// read so that server-sent events reach the client as the child sends
// them. The upstream request has the client's context: a client that
// hangs up cancels it. A child that fails once the answer has begun
// (killed mid-stream) leaves the status sent; the client gets an error
// event, for a stream, and a cut connection either way.
//
// begun says a stream's status and headers went out already (progress
// comments while the model loaded): the child's answer then follows
// them, and an answer that is no stream (llama-server refusing the
// request) becomes an error event.
func forward(w http.ResponseWriter, r *http.Request, client *http.Client, url string, body []byte, writeStall time.Duration, begun bool) error {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	// A kept-alive connection the child closes just as the request goes
	// out fails before the child read it; this header lets the
	// transport send it again on a new connection (net/http retries a
	// POST only when told it may), rather than fail it.
	req.Header.Set("Idempotency-Key", idempotencyKey())
	if a := r.Header.Get("Accept"); a != "" {
		req.Header.Set("Accept", a)
	}
	resp, err := client.Do(req)
	if err != nil {
		if r.Context().Err() != nil {
			return r.Context().Err()
		}
		return withStatus(http.StatusBadGateway, err, "the model's llama-server did not answer")
	}
	defer resp.Body.Close()
	if begun && !isEventStream(resp.Header.Get("Content-Type")) {
		return answerAsEvent(w, r, resp)
	}
	if !begun {
		for _, h := range []string{"Content-Type", "Cache-Control"} {
			if v := resp.Header.Get(h); v != "" {
				w.Header().Set(h, v)
			}
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(resp.StatusCode)
	}
	rc := http.NewResponseController(w)
	defer rc.SetWriteDeadline(time.Time{}) // the connection may serve another request
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			// Each write has writeStall to go through: only a client that
			// stops reading (the connection's buffers full) reaches it,
			// and it then loses the answer rather than holding the model
			// in flight, and every load waiting to evict it, for good.
			rc.SetWriteDeadline(time.Now().Add(writeStall))
			if _, err := w.Write(buf[:n]); err != nil {
				return nil // the client went away or stalled; its context cancels upstream
			}
			if err := rc.Flush(); err != nil {
				return nil
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			if r.Context().Err() != nil {
				return nil
			}
			if isEventStream(resp.Header.Get("Content-Type")) {
				msg, _ := json.Marshal(newErrorBody(http.StatusBadGateway, "", "the model's llama-server stopped in the middle of the answer: "+rerr.Error()))
				fmt.Fprintf(w, "data: %s\n\n", msg)
				rc.Flush()
			}
			// Cut the connection so no client takes the answer as whole.
			panic(http.ErrAbortHandler)
		}
	}
}

// idempotencyKey names one forwarded request.
func idempotencyKey() string { return rand.Text() }

func isEventStream(ct string) bool {
	return len(ct) >= len("text/event-stream") && ct[:len("text/event-stream")] == "text/event-stream"
}
