package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// guarded is a real server (so requests carry the port they arrived on)
// with a runtime holding one instance, i1.
func guarded(t *testing.T, token string) (*httptest.Server, *fakeRuntime) {
	t.Helper()
	rt := newFakeRuntime()
	rt.live["i1"] = Instance{ID: "i1", Model: "running/model", State: "ready"}
	srv := httptest.NewServer(newTestHandler(t, func(c *Config) { c.Runtime, c.Token = rt, token }))
	t.Cleanup(srv.Close)
	return srv, rt
}

// TestGuard replays what a page on another origin, or one whose name was
// rebound to 127.0.0.1, can make a browser send, and checks that nothing
// but the server's own origin reaches the runtime.
func TestGuard(t *testing.T) {
	srv, rt := guarded(t, "")
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	self := "127.0.0.1:" + port
	tests := []struct {
		name, method, path, host, ct, body string
		header                             map[string]string
		status                             int
	}{
		{name: "rebound name, hardware", method: "GET", path: "/api/hw", host: "evil.com:" + port, status: 403},
		{name: "rebound name, panel", method: "GET", path: "/", host: "evil.com:" + port, status: 403},
		{name: "rebound name, no port", method: "GET", path: "/api/hw", host: "evil.com", status: 403},
		{name: "loopback, wrong port", method: "GET", path: "/api/hw", host: "127.0.0.1:1", status: 403},
		{name: "own address", method: "GET", path: "/api/hw", host: self, status: 200},
		{name: "localhost", method: "GET", path: "/api/hw", host: "localhost:" + port, status: 200},
		{name: "ipv6 loopback", method: "GET", path: "/api/hw", host: "[::1]:" + port, status: 200},
		// fetch(..., {method: 'POST', mode: 'no-cors', body: new Blob([...])})
		{name: "no-cors blob unload", method: "POST", path: "/api/unload", host: self, body: `{"id":"i1"}`,
			header: map[string]string{"Origin": "http://127.0.0.1:9", "Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors"}, status: 403},
		{name: "no-cors blob load", method: "POST", path: "/api/load", host: self, body: `{"model":"hf:evil/repo"}`,
			header: map[string]string{"Origin": "http://evil.example"}, status: 403},
		{name: "sandboxed page", method: "POST", path: "/api/load", host: self, ct: "application/json", body: `{"model":"hf:evil/repo"}`,
			header: map[string]string{"Origin": "null"}, status: 403},
		{name: "no content type", method: "POST", path: "/api/unload", host: self, body: `{"id":"i1"}`, status: 415},
		{name: "text/plain form", method: "POST", path: "/api/load", host: self, ct: "text/plain", body: `{"model":"hf:evil/repo"}`, status: 415},
		{name: "cross-site image", method: "GET", path: "/api/fit?model=hf:evil/repo", host: self,
			header: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}, status: 403},
		{name: "cross-site link to the panel", method: "GET", path: "/", host: self,
			header: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, status: 200},
		{name: "cross-site navigation to the API", method: "GET", path: "/api/instances", host: self,
			header: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, status: 403},
		{name: "panel's own fetch", method: "GET", path: "/api/instances", host: self,
			header: map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://" + self}, status: 200},
		{name: "own origin unload", method: "POST", path: "/api/unload", host: self, ct: "application/json", body: `{"id":"i1"}`,
			header: map[string]string{"Origin": "http://" + self, "Sec-Fetch-Site": "same-origin"}, status: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := send(t, srv.URL, tt.method, tt.path, tt.host, tt.ct, tt.body, tt.header)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
		})
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.loads) != 0 {
		t.Errorf("the runtime was asked to load %+v; every load above came from a foreign page", rt.loads)
	}
	if _, ok := rt.live["i1"]; ok {
		t.Error("i1 is still loaded: the server's own origin could not unload it")
	}
}

// TestGuardToken: beyond loopback any Host is accepted, but the API wants
// the token and the panel's files do not.
func TestGuardToken(t *testing.T) {
	const token = "s3cret-token"
	srv, rt := guarded(t, token)
	u, _ := url.Parse(srv.URL)
	lan := "192.0.2.7:" + u.Port()
	tests := []struct {
		name, method, path, ct, body, auth string
		status                             int
	}{
		{"no token", "GET", "/api/hw", "", "", "", 401},
		{"wrong token", "GET", "/api/hw", "", "", "Bearer s3cret-tokem", 401},
		{"not bearer", "GET", "/api/hw", "", "", token, 401},
		{"token", "GET", "/api/hw", "", "", "Bearer " + token, 200},
		{"models without token", "GET", "/v1/models", "", "", "", 401},
		{"load without token", "POST", "/api/load", "application/json", `{"model":"a/b"}`, "", 401},
		{"panel without token", "GET", "/", "", "", "", 200},
		{"unload with token", "POST", "/api/unload", "application/json", `{"id":"i1"}`, "Bearer " + token, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{}
			if tt.auth != "" {
				h["Authorization"] = tt.auth
			}
			status, body := send(t, srv.URL, tt.method, tt.path, lan, tt.ct, tt.body, h)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
		})
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if len(rt.loads) != 0 {
		t.Errorf("loads without the token reached the runtime: %+v", rt.loads)
	}
}

func send(t *testing.T, base, method, path, host, ct, body string, header map[string]string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(b)
}
