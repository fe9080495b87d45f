package source

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

func TestDownloadClientScopesToken(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{}
	record := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[name] = r.Header.Get("Authorization")
			mu.Unlock()
		}
	}
	cdn := httptest.NewServer(record("cdn"))
	defer cdn.Close()
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record("hub")(w, r)
		http.Redirect(w, r, cdn.URL+"/blob", http.StatusFound)
	}))
	defer hub.Close()
	c := NewClient(func(k string) string {
		return map[string]string{"HF_ENDPOINT": hub.URL, "HF_TOKEN": "hf_secret"}[k]
	})
	hc, err := c.DownloadClient()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(hub.URL + "/o/r/resolve/main/m.gguf")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if seen["hub"] != "Bearer hf_secret" {
		t.Errorf("the Hub received Authorization %q, want the token", seen["hub"])
	}
	if a, ok := seen["cdn"]; !ok || a != "" {
		t.Errorf("the CDN (reached: %v) received Authorization %q, want none", ok, a)
	}
}
