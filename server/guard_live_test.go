package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/arch"
)

// seen records the requests that reached a handler and what each was
// answered.
type seen struct {
	mu   sync.Mutex
	reqs []string
}

func (s *seen) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusWriter{ResponseWriter: w, status: 200}
		h.ServeHTTP(rec, r)
		s.mu.Lock()
		s.reqs = append(s.reqs, fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, rec.status))
		s.mu.Unlock()
	})
}

func (s *seen) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs...)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// TestGuardInBrowser is the attack itself: a page on another origin, in
// headless Chromium, tries to unload the running model and load one from
// a repository of its choice (no-cors POSTs with a Blob body, a text/plain
// one, a CORS JSON one, an image naming a Hub repository), and a page whose
// name resolves to 127.0.0.1 tries to read the API. Nothing may reach the
// runtime or make the server open a model; the server's own origin, in the
// same browser, still can unload.
func TestGuardInBrowser(t *testing.T) {
	bin := findChromium(t)
	rt := newFakeRuntime()
	rt.live["i1"] = Instance{ID: "i1", Model: "running/model", State: "ready"}
	var opened sync.Map
	h := newTestHandler(t, func(c *Config) {
		c.Runtime = rt
		c.Open = func(ctx context.Context, ref string) (*arch.Model, error) {
			opened.Store(ref, true)
			return nil, fmt.Errorf("no model %s", ref)
		}
	})
	var hits seen
	api := httptest.NewServer(hits.wrap(h))
	t.Cleanup(api.Close)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!doctype html><title>elsewhere</title><p>a page on another origin</p>")
	}))
	t.Cleanup(evil.Close)
	u, _ := url.Parse(api.URL)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := startDevtools(t, bin, "--no-proxy-server", "--host-resolver-rules=MAP rebound.test 127.0.0.1")
	if err := d.open(ctx, evil.URL+"/"); err != nil {
		t.Fatal(err)
	}
	if err := d.waitFor(ctx, `document.title === "elsewhere"`); err != nil {
		t.Fatal(err)
	}
	script := strings.ReplaceAll(`(async () => {
		const api = "API";
		const out = {};
		const tries = {
			"blob unload": () => fetch(api + "/api/unload", {method: "POST", mode: "no-cors", body: new Blob(['{"id":"i1"}'])}),
			"blob load": () => fetch(api + "/api/load", {method: "POST", mode: "no-cors", body: new Blob(['{"model":"hf:evil/repo"}'])}),
			"text load": () => fetch(api + "/api/load", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: '{"model":"hf:evil/repo"}'}),
			"json load": () => fetch(api + "/api/load", {method: "POST", headers: {"Content-Type": "application/json"}, body: '{"model":"hf:evil/repo"}'}),
			"read hw": () => fetch(api + "/api/hw").then(r => r.text()),
		};
		for (const [name, f] of Object.entries(tries)) {
			try { await f(); out[name] = "sent"; } catch (e) { out[name] = "blocked: " + e.message; }
		}
		await new Promise(done => { const i = new Image(); i.onload = i.onerror = done; i.src = api + "/api/fit?model=hf:evil/image"; });
		return JSON.stringify(out);
	})()`, "API", api.URL)
	res, err := d.eval(ctx, script)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the foreign page's attempts: %s", res)

	// The page whose name was rebound to this server's address.
	if err := d.open(ctx, "http://rebound.test:"+u.Port()+"/api/hw"); err != nil {
		t.Fatal(err)
	}
	// The old document can report "complete" until the navigation
	// commits: wait for the new page's own address too.
	if err := d.waitFor(ctx, `location.host === "rebound.test:`+u.Port()+`" && document.readyState === "complete" && document.body !== null && document.body.innerText.length > 0`); err != nil {
		t.Fatal(err)
	}
	rebound, err := d.eval(ctx, `document.body.innerText`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rebound), "rebound.test") || strings.Contains(string(rebound), "domains") {
		t.Errorf("the rebound page read %s; want the refusal naming its Host", rebound)
	}

	attacks := hits.list()
	refused := 0
	for _, line := range attacks {
		if strings.HasSuffix(line, " 403") || strings.HasSuffix(line, " 415") {
			refused++
		} else {
			t.Errorf("a foreign page's request was answered: %s", line)
		}
	}
	// Five POSTs or their preflights, one GET, one image, one rebound page:
	// fewer would mean the browser never sent them and this test proves
	// nothing.
	if refused < 7 {
		t.Errorf("only %d requests reached the server (%v); the browser did not send the attacks", refused, attacks)
	}
	rt.mu.Lock()
	loads, live := len(rt.loads), len(rt.live)
	rt.mu.Unlock()
	if loads != 0 || live != 1 {
		t.Errorf("after the attacks: %d loads, %d instances; want 0 loads and i1 still running", loads, live)
	}
	opened.Range(func(k, _ any) bool {
		t.Errorf("a foreign page made the server open %v", k)
		return true
	})

	// The server's own origin, in the same browser, still works.
	if err := d.open(ctx, api.URL+"/"); err != nil {
		t.Fatal(err)
	}
	if err := d.waitFor(ctx, `location.origin === "`+api.URL+`" && document.readyState === "complete"`); err != nil {
		t.Fatal(err)
	}
	own, err := d.eval(ctx, `fetch("/api/unload", {method: "POST", headers: {"Content-Type": "application/json"}, body: '{"id":"i1"}'}).then(r => r.status)`)
	if err != nil {
		t.Fatal(err)
	}
	var status int
	json.Unmarshal(own, &status)
	if status != 200 {
		t.Errorf("the panel's origin could not unload: status %d", status)
	}
}
