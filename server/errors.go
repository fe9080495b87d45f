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
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.err }

func badRequest(format string, args ...any) error {
	return &apiError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &apiError{status: http.StatusNotFound, msg: fmt.Sprintf(format, args...)}
}

// withStatus gives err a status, keeping it as the cause.
func withStatus(status int, err error, format string, args ...any) error {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...) + ": " + err.Error(), err: err}
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

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

func writeError(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		status = ae.status
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
		return
	}
	writeJSON(w, status, errorBody{Error: errorDetail{Message: err.Error(), Type: errorType(status)}})
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
		json.NewEncoder(&buf).Encode(errorBody{Error: errorDetail{Message: "encoding the answer: " + err.Error(), Type: "internal"}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}
