package source

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestTokenWithControlsIsRefused: an HF_TOKEN holding CR and LF (pasted
// with a line break, or forged to add a header) was tried three times,
// each refused by net/http as a bad header. It is refused now before any
// request, the error naming where, never the token itself.
func TestTokenWithControlsIsRefused(t *testing.T) {
	var calls atomic.Int32
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.NotFound(w, r)
	}))
	defer hub.Close()
	for _, tc := range []struct{ token, want string }{
		{"hf_secretvalue\r\nX-Evil: 1", "control character (0x0d) at byte 15"},
		{"hf_secret\nvalue", "control character (0x0a)"},
		{"hf_secret\x1bvalue", "control character (0x1b)"},
		{"hf_secret value", "space (0x20)"},
		{"hf_secretvalué", "non-ASCII byte"},
	} {
		calls.Store(0)
		c := NewClient(func(k string) string {
			return map[string]string{"HF_ENDPOINT": hub.URL, "HF_TOKEN": tc.token}[k]
		})
		_, err := c.Open(context.Background(), "hf:owner/repo/model.gguf")
		if err == nil || !strings.Contains(err.Error(), "HF_TOKEN has a "+tc.want) {
			t.Errorf("token %q: error %v, want it refused with %q", tc.token, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("token %q: the error shows the token: %v", tc.token, err)
		}
		if n := calls.Load(); n != 0 {
			t.Errorf("token %q: %d requests sent, want none", tc.token, n)
		}
		if _, err := c.DownloadClient(); err == nil {
			t.Errorf("token %q: DownloadClient accepted it", tc.token)
		}
	}
}
