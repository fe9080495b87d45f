package source

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestHubNamesClimbingOut: a listing naming "../" files made inspect send
// a request, with the token, outside the repository (pull refused them,
// inspect did not). Every command reads the listing through one check now,
// so such a name is never requested.
func TestHubNamesClimbingOut(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path)
		mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/api/models/owner/repo/revision/") {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"sha":"0123456789abcdef0123456789abcdef01234567","siblings":[
				{"rfilename":"../../../victim/private/resolve/main/x-Q4_K_M.gguf"}]}`))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(hub.Close)
	c := NewClient(func(k string) string {
		return map[string]string{"HF_ENDPOINT": hub.URL, "HF_TOKEN": testToken}[k]
	})
	c.CacheDir = ""
	t.Cleanup(c.HTTP.CloseIdleConnections)
	_, err := c.Open(context.Background(), "hf:owner/repo:Q4_K_M")
	if err == nil {
		t.Fatal("a repository listing only names climbing out of it was opened")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range asked {
		if !strings.HasPrefix(p, "/api/models/owner/repo/") {
			t.Errorf("a request left the repository: %s", p)
		}
	}
	if len(asked) != 1 {
		t.Errorf("requests %q; want the listing alone", asked)
	}
}
