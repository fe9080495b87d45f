package server

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"time"
)

// Limits bound how long a connection may hold the API while sending
// little or nothing: without them, a thousand clients sending a body a
// byte at a time, or keeping idle connections open, held a goroutine, a
// socket and buffers each for as long as they liked.
//
// There is no write timeout: an answer may stream for as long as its
// model generates. The read timeout does not cut such an answer either:
// net/http lifts the connection's read deadline once a request's body has
// been read to its end (TestStreamOutlivesReadTimeout holds it to that).
type Limits struct {
	// ReadHeader is how long a request's line and headers may take.
	ReadHeader time.Duration
	// Read is how long a whole request, headers and body, may take to
	// arrive: a load request is a few hundred bytes, and the largest body
	// the API takes (1 MiB) needs 35 KB/s in 30 s.
	Read time.Duration
	// Idle is how long a keep-alive connection may wait for its next
	// request.
	Idle time.Duration
	// MaxHeaderBytes bounds a request's line and headers.
	MaxHeaderBytes int
}

// DefaultLimits are the limits serve-api runs with.
func DefaultLimits() Limits {
	return Limits{ReadHeader: 10 * time.Second, Read: 30 * time.Second, Idle: 60 * time.Second, MaxHeaderBytes: 64 << 10}
}

// NewHTTPServer returns the http.Server that serves h under l, with ctx as
// every request's base context, and its own errors (a failed accept, a
// handler's panic) written to errorLog.
func NewHTTPServer(ctx context.Context, h http.Handler, l Limits, errorLog io.Writer) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeader,
		ReadTimeout:       l.Read,
		IdleTimeout:       l.Idle,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          log.New(errorLog, "headroom serve-api: ", 0),
	}
}
