package source

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// countingTransport counts the requests it is asked to send.
type countingTransport struct {
	rt http.RoundTripper
	n  atomic.Int32
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// A Hub whose name does not resolve, or that nothing listens for, is
// asked once: the error says the network is unreachable and that
// HF_HUB_OFFLINE=1 answers from cached headers, and no retry is logged.
func TestUnreachableOnce(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	closed := srv.URL
	srv.Close()
	for _, tc := range []struct{ name, endpoint string }{
		{"unresolvable", "http://huggingface.invalid"},
		{"refused", closed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			c := NewClient(func(k string) string {
				return map[string]string{"HF_ENDPOINT": tc.endpoint, "HOME": home}[k]
			})
			ct := &countingTransport{rt: c.HTTP.Transport}
			c.HTTP.Transport = ct
			c.Backoff = time.Millisecond
			var logged []string
			c.Log = func(s string) { logged = append(logged, s) }
			_, err := c.Open(context.Background(), "hf:acme/Llama-GGUF:Q4_K_M")
			t.Log(err)
			if !errors.Is(err, ErrUnreachable) {
				t.Fatalf("got %v, want ErrUnreachable", err)
			}
			for _, want := range []string{"the network is unreachable", "HF_HUB_OFFLINE=1"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "gave up after") || strings.Count(err.Error(), "HF_HUB_OFFLINE") != 1 {
				t.Errorf("error %q is not said once", err)
			}
			if n := ct.n.Load(); n != 1 {
				t.Errorf("%d requests sent, want 1", n)
			}
			for _, l := range logged {
				if strings.Contains(l, "retrying") {
					t.Errorf("logged a retry: %s", l)
				}
			}
		})
	}
}
