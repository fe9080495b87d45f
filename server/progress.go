package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// eventStream is a streamed request's answer while its model loads: the
// status and headers of a stream go out with the first progress, and
// each step follows as a server-sent-event comment, which every client
// ignores (the SSE format's lines that start with a colon), so a client
// that knows nothing of them sees only a slower first token. A nil
// eventStream (a request that is no stream) writes nothing.
type eventStream struct {
	w     http.ResponseWriter
	model string
	stall time.Duration
	// start is when the request began waiting: the stream begins once
	// the load is under way (beginSteps) or beginAfter has passed, so
	// that a load refused at once (no room, no such model) is still
	// answered with its status.
	start time.Time
	sent  bool
	last  Progress
	// broken says a write failed: the client is gone or stalled.
	broken bool
}

// begins reports whether a step begins the stream: the ones after
// admission. Otherwise it begins once the request has waited beginAfter.
func begins(step string) bool {
	switch step {
	case "downloading", "loading", "warming up":
		return true
	}
	return false
}

const beginAfter = 2 * time.Second

// progressComment is what each comment carries after "headroom-progress".
type progressComment struct {
	Model string `json:"model"`
	Progress
}

// progress writes where the load stands, as a comment; the first one
// sends the stream's status and headers.
func (e *eventStream) progress(p Progress) {
	if e == nil || e.broken {
		return
	}
	if !e.sent && !begins(p.Step) && time.Since(e.start) < beginAfter {
		return
	}
	if !e.sent {
		h := e.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		e.w.WriteHeader(http.StatusOK)
		e.sent = true
	}
	msg, _ := json.Marshal(progressComment{Model: e.model, Progress: p})
	e.write(fmt.Sprintf(": headroom-progress %s\n\n", msg))
	e.last = p
}

func (e *eventStream) write(s string) {
	rc := http.NewResponseController(e.w)
	rc.SetWriteDeadline(time.Now().Add(e.stall))
	defer rc.SetWriteDeadline(time.Time{})
	if _, err := io.WriteString(e.w, s); err != nil {
		e.broken = true
		return
	}
	if rc.Flush() != nil {
		e.broken = true
	}
}

// begun reports whether the stream's status went out.
func (e *eventStream) begun() bool { return e != nil && e.sent }

// fail ends a begun stream with err as its last event, the error object
// a non-streamed answer would have had as its body (with its status in
// it), and no [DONE]: OpenAI's clients raise it as an API error.
func (e *eventStream) fail(r *http.Request, err error) {
	status, code := http.StatusInternalServerError, ""
	var ae *apiError
	if errors.As(err, &ae) {
		status, code = ae.status, ae.code
	}
	body := newErrorBody(status, code, err.Error())
	msg, _ := json.Marshal(struct {
		errorBody
		Status int `json:"status"`
	}{body, status})
	e.write(fmt.Sprintf("data: %s\n\n", msg))
}

// answerAsEvent gives a child's answer that is no stream (llama-server
// refusing the request: a context too long, a bad parameter) to a stream
// that has begun, as its one error event.
func answerAsEvent(w http.ResponseWriter, r *http.Request, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	e := &eventStream{w: w, stall: DefaultWriteStall, sent: true}
	var child errorBody
	msg := string(b)
	if json.Unmarshal(b, &child) == nil && child.Error.Message != "" {
		msg = child.Error.Message
	}
	if resp.StatusCode < 400 {
		msg = fmt.Sprintf("the model's llama-server answered %d without a stream: %s", resp.StatusCode, msg)
	}
	status := resp.StatusCode
	if status < 400 {
		status = http.StatusBadGateway
	}
	e.fail(r, &apiError{status: status, msg: msg})
	return nil
}
