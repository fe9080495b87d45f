// Package engine runs llama.cpp's llama-server: it finds the binary, reads
// its build, starts it with planned flags, reads its log, and decides when
// the model is really ready to serve.
//
// Readiness is proved by a real one-token completion, never by /health
// alone: after a fatal out-of-memory at init, llama-server has been seen to
// answer /health with 200 while every completion fails with HTTP 500. The
// log is read as it is written, so a failure names its cause (an allocation
// failure, a model that would not load, a process that exited) and carries
// the log lines that show it. ParseLog and Reconcile compare the buffers
// llama.cpp reports allocating with the ones headroom planned.
package engine

import (
	"fmt"
	"strings"
)

// State is where a model stands on its way to being served, in the terms a
// person following it uses.
type State string

// The states in the order a model goes through them. The caller reports the
// first three while it resolves, admits and downloads the model; a Server
// reports loading, ready and failed.
const (
	StateResolving   State = "resolving"
	StateAssessing   State = "assessing"
	StateDownloading State = "downloading"
	StateLoading     State = "loading"
	StateReady       State = "ready"
	StateFailed      State = "failed"
)

// Reason classifies why a model did not become ready.
type Reason string

// The reasons, from most to least specific. When several apply, the most
// specific is reported: an allocation failure in the log makes the reason
// ReasonOutOfMemory whether the process then exited, hung, or (as
// llama-server can after a fatal init OOM) answered /health with 200 while
// its completions failed.
const (
	// ReasonOutOfMemory: the log shows an allocation failure while loading
	// the model or creating its context.
	ReasonOutOfMemory Reason = "out_of_memory_at_init"
	// ReasonCompletionFailed: /health said the model was loaded, but the
	// proving completion failed (non-200 status or a body without content).
	ReasonCompletionFailed Reason = "completion_failed"
	// ReasonEngineError: the process exited after logging an error other
	// than an allocation failure ("error loading model", a port in use...).
	ReasonEngineError Reason = "engine_error"
	// ReasonEngineExited: the process exited without logging why.
	ReasonEngineExited Reason = "engine_exited"
	// ReasonNotReadyInTime: the model was still not serving when the time
	// allowed ran out.
	ReasonNotReadyInTime Reason = "not_ready_in_time"
)

// Failure is why a server did not become ready. It is the error WaitReady
// returns; use errors.As to read it.
type Failure struct {
	// State is the server's state after the failure (StateFailed).
	State  State  `json:"state"`
	Reason Reason `json:"reason"`
	// Detail says what was seen, in one line: the exit status, the log
	// line that shows the cause, or the completion's status and body.
	Detail string `json:"detail"`
	// ExitCode is the process's exit status, or -1 when it is still
	// running or was ended by a signal.
	ExitCode int `json:"exit_code"`
	// LogTail is the end of the server's log when the failure was found.
	LogTail []string `json:"log_tail,omitempty"`
}

// Error reads as one line: the reason and what was seen.
func (f *Failure) Error() string {
	d := oneLine(f.Detail)
	if d == "" {
		return fmt.Sprintf("llama-server did not become ready: %s", f.Reason)
	}
	return fmt.Sprintf("llama-server did not become ready (%s): %s", f.Reason, d)
}

// oneLine folds line breaks so a detail quoting a body or a log line stays
// on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// excerpt shortens s to about n bytes for quoting in a message.
func excerpt(s string, n int) string {
	s = oneLine(s)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut < len(s) && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
