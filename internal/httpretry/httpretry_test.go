package httpretry

import (
	"net/http"
	"testing"
	"time"
)

func TestTransient(t *testing.T) {
	for code, want := range map[int]bool{200: false, 404: false, 403: false, 408: true, 429: true, 500: true, 502: true, 503: true, 504: true, 501: false} {
		if got := Transient(code); got != want {
			t.Errorf("Transient(%d) = %v, want %v", code, got, want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	future := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	for _, c := range []struct {
		in       string
		min, max time.Duration
		ok       bool
	}{
		{"", 0, 0, false},
		{" 7 ", 7 * time.Second, 7 * time.Second, true},
		{"-1", 0, 0, false},
		{"soon", 0, 0, false},
		{future, 80 * time.Second, 90 * time.Second, true},
		{"Mon, 02 Jan 2006 15:04:05 GMT", 0, 0, true},
	} {
		d, ok := RetryAfter(c.in)
		if ok != c.ok || d < c.min || d > c.max {
			t.Errorf("RetryAfter(%q) = %v, %v; want %v..%v, %v", c.in, d, ok, c.min, c.max, c.ok)
		}
	}
}
