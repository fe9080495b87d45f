// Package httpretry holds the rules headroom's HTTP clients (header reads
// and downloads) share for deciding whether a failed request is worth
// another try, and when, and for reading where a resumed answer starts.
package httpretry

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Transient reports whether a status says the server may answer the same
// request later: timeouts, rate limits and server-side errors.
func Transient(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// RetryAfter parses a Retry-After header: seconds or an HTTP date (a date
// in the past is no wait).
func RetryAfter(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}
