package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// apiError is a failure with the status it answers.
type apiError struct {
	status int
	msg    string
	err    error // the cause, for errors.Is/As
	// code is the error object's machine-readable code (OpenAI's
	// "model_not_found"); "" derives one from the status.
	code string
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.err }

func badRequest(format string, args ...any) error {
	return &apiError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *apiError {
	return &apiError{status: http.StatusNotFound, msg: fmt.Sprintf(format, args...)}
}

// withStatus gives err a status, keeping it as the cause.
func withStatus(status int, err error, format string, args ...any) *apiError {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...) + ": " + err.Error(), err: err}
}

// noRuntime is the 501 of a request that needs models loaded on a server
// started without a runtime; verb is what it cannot do (load, serve).
func noRuntime(r *http.Request, verb string) *apiError {
	return &apiError{status: http.StatusNotImplemented,
		msg: fmt.Sprintf("%s: this server was started without a runtime, so it can plan but not %s models", r.URL.Path, verb)}
}

// withCode gives e the error object's code.
func (e *apiError) withCode(code string) *apiError {
	e.code = code
	return e
}

// errorType names a status the way OpenAI-compatible clients read it.
func errorType(status int) string {
	switch {
	case status == http.StatusNotFound:
		return "not_found"
	case status == http.StatusConflict:
		return "conflict"
	case status == http.StatusUnauthorized:
		return "unauthorized"
	case status == http.StatusForbidden:
		return "forbidden"
	case status == http.StatusNotImplemented:
		return "not_implemented"
	case status == http.StatusServiceUnavailable:
		return "unavailable"
	case status >= 500:
		return "internal"
	}
	return "invalid_request_error"
}

// Codes of the error object a client may act on; the others are the
// status's (errorCode).
const (
	// CodeModelNotFound is a model no listing has (OpenAI's code).
	CodeModelNotFound = "model_not_found"
	// CodeInsufficientMemory is a model that cannot be loaded now, even
	// by stopping every model that may be stopped.
	CodeInsufficientMemory = "insufficient_memory"
	// CodeQueueFull is a request turned away because too many wait for
	// the model's load; Retry-After says when to try again.
	CodeQueueFull = "queue_full"
	// CodeLoadFailed is a model whose llama-server did not start.
	CodeLoadFailed = "load_failed"
)

// errorBody is OpenAI's error object, which every OpenAI client reads:
// message, type, param and code.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	// Param is the request field at fault; null where none is, as OpenAI
	// sends it.
	Param *string `json:"param"`
	Code  string  `json:"code"`
}

// errorCode is the code of a status with no code of its own.
func errorCode(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request"
	case http.StatusUnauthorized:
		return "invalid_api_key"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusConflict:
		return "conflict"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusUnsupportedMediaType:
		return "unsupported_media_type"
	case http.StatusNotImplemented:
		return "not_implemented"
	case http.StatusBadGateway:
		return "upstream_failed"
	case http.StatusServiceUnavailable:
		return "unavailable"
	}
	return "internal_error"
}

func writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := http.StatusInternalServerError, ""
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		status, code = ae.status, ae.code
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
		return
	}
	writeJSON(w, status, newErrorBody(status, code, err.Error()))
}

// newErrorBody is the error object of a status; code "" is the status's.
func newErrorBody(status int, code, msg string) errorBody {
	typ := errorType(status)
	if code == "" {
		code = errorCode(status)
	}
	if code == CodeModelNotFound {
		typ = "invalid_request_error" // as OpenAI types it
	}
	return errorBody{Error: errorDetail{Message: msg, Type: typ, Code: code}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	// As the CLI's --json: indented, and without HTML escaping, which
	// would garble the sources' quoted commands and comparisons.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		json.NewEncoder(&buf).Encode(newErrorBody(status, "", "encoding the answer: "+err.Error()))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}
