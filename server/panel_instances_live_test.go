package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// gatedLoader is a fakeLoader whose loads of one reference report their
// progress and then wait for gate, so that a test can see the panel while
// that load is under way.
type gatedLoader struct {
	*fakeLoader
	ref  string
	gate chan struct{}
}

func (g *gatedLoader) Load(ctx context.Context, m ServedModel, room Room) (Child, error) {
	if m.Ref == g.ref {
		if room.Progress != nil {
			room.Progress(Progress{Step: "loading", Detail: "text_model", Percent: 50})
		}
		select {
		case <-g.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.fakeLoader.Load(ctx, m, room)
}

// gatedServer is providerServer with g as the loader.
func gatedServer(t *testing.T, g *gatedLoader, cfg PoolConfig) (*httptest.Server, *Pool) {
	t.Helper()
	cfg.Loader = g
	cfg.Accept = func(ref string) error {
		if _, ok := g.need[ref]; !ok {
			return fmt.Errorf("%q: %w", ref, ErrUnknownModel)
		}
		return nil
	}
	pool := NewPool(cfg)
	srv := httptest.NewServer(newTestHandler(t, func(c *Config) { c.Pool = pool }))
	t.Cleanup(func() {
		srv.Close()
		pool.Close(context.Background())
	})
	return srv, pool
}

// js quotes s as a JavaScript string.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// click waits until the button sel names is there and enabled, and
// clicks it once.
func (d *devtools) click(ctx context.Context, sel string) error {
	return d.waitFor(ctx, `(() => { const b = document.querySelector(`+js(sel)+`);
		if (!b || b.disabled || b.hidden) return false;
		b.click();
		return true; })()`)
}

// eventually polls cond until it holds or ctx ends.
func eventually(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func pinned(pool *Pool, name string) bool {
	for _, m := range pool.Models() {
		if m.Name == name {
			return m.Pinned
		}
	}
	return false
}

// TestPanelInstancesLive drives the provider from the panel in headless
// Chromium: the instance a chat loaded is listed with its memory, Pin,
// Unpin and Unload change the pool, the assessment of a model that does
// not fit beside it names it as the one a load would stop, and Load loads
// the selected model, its progress shown meanwhile.
func TestPanelInstancesLive(t *testing.T) {
	bin := findChromium(t)
	const small, big = "qwen3-0.6b/Q4_K_M", "llama-3.3-70b-instruct/Q4_K_M"
	l := newFakeLoader(t, 1<<50, map[string]int64{"a": 30 << 30, small: 1 << 30})
	g := &gatedLoader{fakeLoader: l, ref: small, gate: make(chan struct{})}
	srv, pool := gatedServer(t, g, PoolConfig{Models: []ServedModel{{Name: "a", Ref: "a"}}})
	getJSON[recommendAnswer](t, srv.URL+"/api/recommend")
	streamed(t, mustChat(t, srv.URL, "a"))
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	d := startDevtools(t, bin)
	if err := d.open(ctx, srv.URL+"/?model="+big); err != nil {
		t.Fatal(err)
	}
	wait := func(what, script string) {
		t.Helper()
		if err := d.waitFor(ctx, script); err != nil {
			page, _ := d.eval(ctx, `document.querySelector("main")?.innerText ?? ""`)
			t.Fatalf("%s: %v\nthe page says: %s", what, err, tail(string(page), 3000))
		}
	}
	click := func(sel string) {
		t.Helper()
		if err := d.click(ctx, sel); err != nil {
			t.Fatalf("clicking %s: %v", sel, err)
		}
	}
	shoot := func(name string) {
		if dir := os.Getenv("HEADROOM_SCREENSHOT_DIR"); dir != "" {
			d.screenshot(t, ctx, filepath.Join(dir, "panel-instances-"+name+".png"))
		}
	}
	row := `#instances tr[data-model="a"]`
	wait("the panel and its instances", `document.body?.dataset.ready === "1" && document.getElementById("running")?.dataset.ready === "1"`)
	wait("a's row with its 30 GiB of ram", fmt.Sprintf(`(() => { const m = document.querySelector(%s);
		return m?.dataset.bytes === "%d" && m.textContent === "ram 30.00 GiB"; })()`, js(row+` [data-domain="ram"]`), int64(30<<30)))
	verdict := func(want string) string {
		return `(document.getElementById("verdict")?.textContent || "").includes(` + js(want) + `)`
	}
	wait("the verdict naming a as the model to stop", verdict("fits once the provider stops a"))
	shoot("make-room")

	click(row + ` button[data-action="pin"]`)
	eventually(t, ctx, "a pinned in the pool", func() bool { return pinned(pool, "a") })
	wait("a's row saying pinned", `document.querySelector(`+js(row+` .pinned`)+`)?.textContent === "pinned" && !!document.querySelector(`+js(row+` button[data-action="unpin"]`)+`)`)
	// The assessment follows: a pinned model is not stopped.
	wait("the verdict keeping the pinned a", verdict("kept: a (pinned)"))

	click(row + ` button[data-action="unpin"]`)
	eventually(t, ctx, "a unpinned in the pool", func() bool { return !pinned(pool, "a") })
	wait("a's row no longer pinned", `document.querySelector(`+js(row+` .pinned`)+`)?.textContent === "" && !!document.querySelector(`+js(row+` button[data-action="pin"]`)+`)`)
	wait("the verdict naming a again", verdict("fits once the provider stops a"))

	click(row + ` button[data-action="unload"]`)
	eventually(t, ctx, "a unloaded", func() bool { return states(pool)["a"] == StateUnloaded })
	wait("a's row gone and its unload the newest event", `!document.querySelector(`+js(row)+`)
		&& document.querySelector("#events tbody tr")?.dataset.kind === "unload"
		&& document.querySelector("#events tbody tr").textContent.includes("unloaded by request")`)

	// Load the model selected in the panel; its progress is listed while
	// the load waits at the gate.
	if _, err := d.eval(ctx, `(() => { const s = document.getElementById("model");
		s.value = `+js(small)+`; s.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`); err != nil {
		t.Fatal(err)
	}
	wait("the assessment of "+small, `(document.getElementById("assessment")?.dataset.query || "").includes(`+js("model="+small[:10])+`)`)
	click("#load")
	smallRow := `#instances tr[data-model=` + js(small) + `]`
	wait("Load saying loading… and the row its progress", `document.getElementById("load").textContent === "loading…"
		&& document.querySelector(`+js(smallRow)+`)?.dataset.state === "loading"
		&& document.querySelector(`+js(smallRow+` .state`)+`).textContent.includes("loading: loading (text_model) 50%")`)
	if s := states(pool)[small]; s != StateLoading {
		t.Errorf("%s is %q in the pool while its load waits", small, s)
	}
	close(g.gate)
	eventually(t, ctx, small+" loaded", func() bool { return states(pool)[small] == StateLoaded })
	wait("Load back and the row loaded with its memory", `document.getElementById("load").textContent === "Load"
		&& document.querySelector(`+js(smallRow)+`)?.dataset.state === "loaded"
		&& document.querySelector(`+js(smallRow+` [data-domain="ram"]`)+`)?.textContent === "ram 1.00 GiB"`)
	if msg, _ := d.eval(ctx, `document.getElementById("error").hidden ? "" : document.getElementById("error").textContent`); string(msg) != `""` {
		t.Errorf("the panel shows an error: %s", msg)
	}
	shoot("loaded")
}

// screenshot saves what the window shows as a PNG, for a person to review.
func (d *devtools) screenshot(t *testing.T, ctx context.Context, file string) {
	t.Helper()
	r, err := d.call(ctx, "Page.captureScreenshot", map[string]any{"format": "png"})
	if err != nil {
		t.Fatal(err)
	}
	var shot struct {
		Data []byte `json:"data"` // base64 in JSON, as encoding/json reads []byte
	}
	if err := json.Unmarshal(r, &shot); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, shot.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", file)
}

// TestPanelLoadWithoutProvider: on a server started without a runtime
// (/api/instances says provider false) the panel offers no Load.
func TestPanelLoadWithoutProvider(t *testing.T) {
	bin := findChromium(t)
	srv := httptest.NewServer(newTestHandler(t, nil))
	t.Cleanup(srv.Close)
	getJSON[recommendAnswer](t, srv.URL+"/api/recommend")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	d := startDevtools(t, bin)
	if err := d.open(ctx, srv.URL+"/?model=qwen3-0.6b/Q4_K_M"); err != nil {
		t.Fatal(err)
	}
	if err := d.waitFor(ctx, `document.body?.dataset.ready === "1" && document.getElementById("running")?.dataset.ready === "1"`); err != nil {
		t.Fatal(err)
	}
	// /api/instances says there is no provider: Load is never offered.
	hidden, err := d.eval(ctx, `document.getElementById("load").hidden`)
	if err != nil || string(hidden) != "true" {
		page, _ := d.eval(ctx, `document.querySelector("main")?.innerText ?? ""`)
		t.Fatalf("Load hidden: %s %v\nthe page says: %s", hidden, err, tail(string(page), 3000))
	}
}
