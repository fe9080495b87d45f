package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// How WaitReady probes. A loopback GET every 100 ms costs nothing and keeps
// the wait short for small models.
const (
	pollInterval  = 100 * time.Millisecond
	healthTimeout = 2 * time.Second
	// logSettle is how long to wait, after the child exited, for the rest
	// of its output before classifying the failure from it.
	logSettle = 2 * time.Second
	// failureTail is how many log lines a Failure carries.
	failureTail = 40
	maxBody     = 64 << 10
)

// probeBody is the proving request: one token, and no prompt cache so the
// request really runs the model.
var probeBody = []byte(`{"prompt":"Hello","n_predict":1,"cache_prompt":false}`)

// Proof names the request that proves a server started with args ready:
// "completion", or "embedding" or "rerank" for an embedding server.
func Proof(args []string) string {
	switch path, _, _ := probe(args); path {
	case "/v1/rerank":
		return "rerank"
	case "/v1/embeddings":
		return "embedding"
	}
	return "completion"
}

// probe is the proving request for a server started with args, and the
// JSON field its answer must have: a completion, or for an embedding
// server (which evaluates no completion) an embedding of three token ids
// every vocabulary has, or for a reranker a query and a document.
func probe(args []string) (path string, body []byte, field string) {
	for _, a := range args {
		switch a {
		case "--rerank", "--reranking":
			return "/v1/rerank", []byte(`{"query":"Hello","documents":["Hello"]}`), "results"
		case "--embedding", "--embeddings":
			return "/v1/embeddings", []byte(`{"input":[1,2,3]}`), "data"
		}
	}
	return "/completion", probeBody, "content"
}

// WaitReady waits until the model serves: GET /health answers 200 (503
// means still loading) and then a one-token POST /completion answers 200
// with a JSON body holding a "content" string. /health alone is not
// trusted (see the package doc). It returns nil when ready, a *Failure
// when the model will not become ready or timeout (if positive) passes,
// and ctx's error, wrapped, if ctx ends first. The server's state becomes
// StateReady or StateFailed accordingly.
func (s *Server) WaitReady(ctx context.Context, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, errReadyTimeout)
		defer cancel()
	}
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	last := "no answer yet"
	for {
		select {
		case <-s.exited:
			return s.afterExit()
		default:
		}
		status, body, err := s.get(ctx, "/health")
		switch {
		case err != nil && ctx.Err() != nil:
			// Cut short by the deadline: the previous answer says more.
		case err != nil:
			last = fmt.Sprintf("GET /health: %v", err)
		case status == http.StatusOK:
			ok, what, f := s.prove(ctx)
			if ok {
				s.setState(StateReady)
				return nil
			}
			if f != nil {
				return s.fail(f)
			}
			last = what
		default:
			last = fmt.Sprintf("GET /health answered %d %s", status, excerpt(string(body), 200))
		}
		select {
		case <-s.exited:
			return s.afterExit()
		case <-ctx.Done():
			if context.Cause(ctx) == errReadyTimeout {
				return s.fail(s.timeoutFailure(timeout, last))
			}
			return fmt.Errorf("waiting for llama-server at %s: %w", s.url, ctx.Err())
		case <-tick.C:
		}
	}
}

var errReadyTimeout = errors.New("readiness timeout")

// ErrStopped is wrapped by WaitReady's error when the server was stopped
// (by Stop or by cancelling Start's context) before it became ready: the
// caller ended it, so it is not a Failure.
var ErrStopped = errors.New("llama-server was stopped")

// afterExit is WaitReady's answer once the child has exited.
func (s *Server) afterExit() error {
	if s.stopRequested() {
		return fmt.Errorf("waiting for llama-server at %s: %w", s.url, ErrStopped)
	}
	return s.fail(s.exitFailure())
}

// prove sends the one-token completion. It reports true when the model
// answered and a Failure when it answered wrongly; otherwise (a 503 while
// loading finishes, a dropped connection, ctx ending) it says what
// happened and WaitReady's loop decides.
func (s *Server) prove(ctx context.Context) (bool, string, *Failure) {
	path, body, field := probe(s.opts.Args)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+path, bytes.NewReader(body))
	if err != nil {
		return false, err.Error(), nil
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		// A crash during the completion shows up as the exit; anything
		// else is retried until the time runs out.
		return false, fmt.Sprintf("GET /health answered 200, but POST %s failed: %v", path, err), nil
	}
	defer resp.Body.Close()
	answerBody, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if resp.StatusCode == http.StatusServiceUnavailable {
		return false, fmt.Sprintf("GET /health answered 200, then POST %s answered 503 (still loading)", path), nil
	}
	if resp.StatusCode != http.StatusOK {
		return false, "", s.completionFailure(fmt.Sprintf("GET /health answered 200, but POST %s answered %d: %s",
			path, resp.StatusCode, excerpt(string(answerBody), 300)))
	}
	var answer map[string]any
	if err := json.Unmarshal(answerBody, &answer); err != nil {
		return false, "", s.completionFailure(fmt.Sprintf("POST %s answered 200 with a body that is not JSON (%v): %s",
			path, err, excerpt(string(answerBody), 300)))
	}
	ok := false
	switch v := answer[field].(type) {
	case string:
		ok = true
	case []any:
		ok = len(v) > 0
	}
	if !ok {
		return false, "", s.completionFailure(fmt.Sprintf(`POST %s answered 200 without %q: %s`,
			path, field, excerpt(string(answerBody), 300)))
	}
	return true, "", nil
}

func (s *Server) get(ctx context.Context, path string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	return resp.StatusCode, body, nil
}

// fail records a failure: the state becomes failed and the log tail is
// attached.
func (s *Server) fail(f *Failure) *Failure {
	f.State = StateFailed
	f.LogTail = s.log.tail(failureTail)
	s.setState(StateFailed)
	return f
}

// exitFailure explains an exit, once the child's output has been read.
func (s *Server) exitFailure() *Failure {
	select {
	case <-s.logDone:
	case <-time.After(logSettle):
	}
	oom, errLine := s.log.signals()
	status := exitStatus(s.exitCode, s.exitErr)
	switch {
	case oom != "":
		return &Failure{Reason: ReasonOutOfMemory, ExitCode: s.exitCode,
			Detail: fmt.Sprintf("llama-server %s after an allocation failure: %s", status, oom)}
	case errLine != "":
		return &Failure{Reason: ReasonEngineError, ExitCode: s.exitCode,
			Detail: fmt.Sprintf("llama-server %s: %s", status, errLine)}
	}
	return &Failure{Reason: ReasonEngineExited, ExitCode: s.exitCode,
		Detail: fmt.Sprintf("llama-server %s while loading, logging no error", status)}
}

// completionFailure is the "healthy but broken" case; an allocation
// failure in the log is its more specific explanation.
func (s *Server) completionFailure(detail string) *Failure {
	if oom, _ := s.log.signals(); oom != "" {
		return &Failure{Reason: ReasonOutOfMemory, ExitCode: -1,
			Detail: fmt.Sprintf("%s; the log shows an allocation failure at init: %s", detail, oom)}
	}
	return &Failure{Reason: ReasonCompletionFailed, ExitCode: -1, Detail: detail}
}

func (s *Server) timeoutFailure(timeout time.Duration, last string) *Failure {
	oom, errLine := s.log.signals()
	if oom != "" {
		return &Failure{Reason: ReasonOutOfMemory, ExitCode: -1,
			Detail: fmt.Sprintf("not serving after %s (%s); the log shows an allocation failure: %s", timeout, last, oom)}
	}
	d := fmt.Sprintf("not serving after %s; last: %s", timeout, last)
	if errLine != "" {
		d += "; last error logged: " + errLine
	}
	return &Failure{Reason: ReasonNotReadyInTime, ExitCode: -1, Detail: d}
}

func exitStatus(code int, err error) string {
	if code >= 0 {
		return fmt.Sprintf("exited with status %d", code)
	}
	if err != nil {
		return fmt.Sprintf("exited (%v)", err)
	}
	return "exited"
}
