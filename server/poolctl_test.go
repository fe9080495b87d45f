package server

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

func postJSON(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestProviderProgressComments: a streamed request that waits for a
// load hears where it stands as comments before its first token; one
// that is no stream gets its answer alone.
func TestProviderProgressComments(t *testing.T) {
	l := newFakeLoader(t, 1000*mib, map[string]int64{"a": 100 * mib, "b": 100 * mib})
	l.loadDelay = 100 * time.Millisecond
	srv, _ := providerServer(t, l, PoolConfig{})
	resp, err := chat(srv.URL, "a", true)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var comments, data []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		switch line := sc.Text(); {
		case strings.HasPrefix(line, ": headroom-progress "):
			if len(data) > 0 {
				t.Errorf("a comment after the first token: %q", line)
			}
			comments = append(comments, line)
		case strings.HasPrefix(line, "data: "):
			data = append(data, line)
		}
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if len(comments) == 0 {
		t.Fatal("no progress comment before the first token")
	}
	var c progressComment
	if err := json.Unmarshal([]byte(strings.TrimPrefix(comments[0], ": headroom-progress ")), &c); err != nil ||
		c.Model != "a" || c.Step != "loading" || c.Percent != 50 {
		t.Errorf("comment %q: %+v %v", comments[0], c, err)
	}
	if len(data) != 4 || data[3] != "data: [DONE]" {
		t.Errorf("events %q", data)
	}
	// Not streamed: the answer alone, whatever the load said.
	resp, err = chat(srv.URL, "b", false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Contains(string(b), "headroom-progress") || !strings.HasPrefix(string(b), `{"object":"chat.completion"`) {
		t.Errorf("non-streamed answer %d %s", resp.StatusCode, b)
	}
}

// TestProviderStreamFailsUnderWay: a load that fails once under way,
// after the stream began with its progress, ends the stream with an
// error event that carries the status, and no [DONE].
func TestProviderStreamFailsUnderWay(t *testing.T) {
	l := newFakeLoader(t, 1000*mib, map[string]int64{"bad": 100 * mib})
	l.failLoad, l.loadDelay = "bad", 200*time.Millisecond
	srv, _ := providerServer(t, l, PoolConfig{})
	resp, err := chat(srv.URL, "bad", true)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	if resp.StatusCode != 200 || !strings.HasPrefix(text, ": headroom-progress ") || strings.Contains(text, "[DONE]") {
		t.Fatalf("%d %q", resp.StatusCode, text)
	}
	_, data, ok := strings.Cut(text, "\ndata: ")
	var e struct {
		errorBody
		Status int `json:"status"`
	}
	if !ok || json.Unmarshal([]byte(strings.TrimSpace(data)), &e) != nil || e.Status != 502 || e.Error.Code != CodeLoadFailed ||
		!strings.Contains(e.Error.Message, "exited while loading") {
		t.Errorf("the error event %q: %+v", data, e)
	}
}

// TestProviderStreamRefusedAtOnce: a load refused before it is under
// way is answered with its status, stream or not.
func TestProviderStreamRefusedAtOnce(t *testing.T) {
	l := newFakeLoader(t, 100*mib, map[string]int64{"huge": 500 * mib})
	srv, _ := providerServer(t, l, PoolConfig{})
	resp, err := chat(srv.URL, "huge", true)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e errorBody
	if resp.StatusCode != 503 || json.Unmarshal(b, &e) != nil || e.Error.Code != CodeInsufficientMemory {
		t.Errorf("%d %s, want 503 insufficient_memory", resp.StatusCode, b)
	}
	// An unknown model: OpenAI's 404.
	resp, err = chat(srv.URL, "gpt-4", true)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || json.Unmarshal(b, &e) != nil || e.Error.Code != CodeModelNotFound || e.Error.Type != "invalid_request_error" {
		t.Errorf("%d %s, want 404 model_not_found", resp.StatusCode, b)
	}
}

// TestProviderByName: pin, unpin, unload and load by name, by alias and
// by the id /api/instances lists, from the API and llama-server's router
// endpoints.
func TestProviderByName(t *testing.T) {
	l := newFakeLoader(t, 250*mib, map[string]int64{"a": 100 * mib, "b": 100 * mib, "c": 100 * mib})
	srv, pool := providerServer(t, l, PoolConfig{Models: []ServedModel{{Name: "a", Ref: "a", Aliases: []string{"chat"}}, {Name: "b", Ref: "b"}, {Name: "c", Ref: "c"}}})
	for _, m := range []string{"chat", "b"} {
		streamed(t, mustChat(t, srv.URL, m))
	}
	if s := states(pool); s["a"] != StateLoaded || s["b"] != StateLoaded {
		t.Fatalf("states %v", s)
	}
	if code, b := postJSON(t, srv.URL+"/api/pin", `{"model":"chat"}`); code != 200 || !strings.Contains(string(b), `"pinned": true`) {
		t.Fatalf("pin: %d %s", code, b)
	}
	// c needs one of a and b stopped; a, the least recently used, is
	// pinned, so b goes.
	streamed(t, mustChat(t, srv.URL, "c"))
	if s := states(pool); s["a"] != StateLoaded || s["b"] != StateUnloaded {
		t.Errorf("after c: %v, want the pinned a kept", s)
	}
	if code, b := postJSON(t, srv.URL+"/api/unpin", `{"model":"a"}`); code != 200 || !strings.Contains(string(b), `"pinned": false`) {
		t.Errorf("unpin: %d %s", code, b)
	}
	// Unload by name, and by the id /api/instances gives.
	if code, b := postJSON(t, srv.URL+"/api/unload", `{"model":"a"}`); code != 200 {
		t.Errorf("unload a: %d %s", code, b)
	}
	var id string
	for _, in := range instancesOf(t, srv.URL) {
		if in.Model == "c" {
			id = in.ID
		}
	}
	if code, b := postJSON(t, srv.URL+"/api/unload", `{"id":"`+id+`"}`); id == "" || code != 200 {
		t.Errorf("unload c by id %q: %d %s", id, code, b)
	}
	if s := states(pool); s["a"] != StateUnloaded || s["c"] != StateUnloaded {
		t.Errorf("after the unloads: %v", s)
	}
	for _, tt := range []struct {
		path, body string
		status     int
		code       string
	}{
		{"/api/unload", `{"model":"a"}`, 409, "model_not_loaded"},
		{"/api/unload", `{"model":"zzz"}`, 404, CodeModelNotFound},
		{"/api/pin", `{"model":"zzz"}`, 404, CodeModelNotFound},
		{"/api/unload", `{"model":"a","id":"x"}`, 400, "invalid_request"},
		{"/models/unload", `{"model":"b"}`, 409, "model_not_loaded"},
	} {
		code, b := postJSON(t, srv.URL+tt.path, tt.body)
		var e errorBody
		if code != tt.status || json.Unmarshal(b, &e) != nil || e.Error.Code != tt.code {
			t.Errorf("%s %s: %d %s, want %d %s", tt.path, tt.body, code, b, tt.status, tt.code)
		}
	}
	// llama-server's router endpoints.
	if code, b := postJSON(t, srv.URL+"/models/load", `{"model":"b"}`); code != 200 || !strings.Contains(string(b), `"success": true`) {
		t.Errorf("/models/load: %d %s", code, b)
	}
	if s := states(pool); s["b"] != StateLoaded {
		t.Errorf("after /models/load: %v", s)
	}
	if code, _ := postJSON(t, srv.URL+"/models/unload", `{"model":"b"}`); code != 200 || states(pool)["b"] != StateUnloaded {
		t.Errorf("/models/unload: %d %v", code, states(pool))
	}
	kinds := eventKinds(pool)
	for _, k := range []string{"pinned a", "unpinned a", "unload a", "unload c", "unload b"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("no event %q in %q", k, kinds)
		}
	}
}

// TestPoolConfigure: new settings add models, drop the unused ones, load
// the warm ones and mark a running model whose flags changed.
func TestPoolConfigure(t *testing.T) {
	l := newFakeLoader(t, 1000*mib, map[string]int64{"a": 100 * mib, "b": 100 * mib, "c": 100 * mib})
	srv, pool := providerServer(t, l, PoolConfig{Models: []ServedModel{{Name: "a", Ref: "a", Flags: []string{"-c", "4096"}}, {Name: "b", Ref: "b"}}})
	streamed(t, mustChat(t, srv.URL, "a"))
	pool.Configure([]ServedModel{{Name: "a", Ref: "a", Flags: []string{"-c", "8192"}, Aliases: []string{"big"}}, {Name: "c", Ref: "c", Warm: true}})
	deadline := time.Now().Add(5 * time.Second)
	for states(pool)["c"] != StateLoaded && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	s := states(pool)
	if _, ok := s["b"]; ok || s["c"] != StateLoaded || s["a"] != StateLoaded {
		t.Errorf("after Configure: %v, want b dropped, c loaded warm, a still loaded", s)
	}
	var stale bool
	for _, m := range pool.Models() {
		if m.Name == "a" {
			stale = m.Stale
		}
	}
	if !stale {
		t.Error("a runs on -c 4096 and its settings say 8192, but it is not marked stale")
	}
	streamed(t, mustChat(t, srv.URL, "big"))
	if code, _ := postJSON(t, srv.URL+"/api/unload", `{"model":"big"}`); code != 200 {
		t.Errorf("unload by alias: %d", code)
	}
	streamed(t, mustChat(t, srv.URL, "a"))
	for _, m := range pool.Models() {
		if m.Name == "a" && m.Stale {
			t.Error("a was loaded again on its new settings, and is still marked stale")
		}
	}
}

func mustChat(t *testing.T, url, model string) *http.Response {
	t.Helper()
	resp, err := chat(url, model, true)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func instancesOf(t *testing.T, url string) []Instance {
	t.Helper()
	resp, err := http.Get(url + "/api/instances")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out instancesJSON
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Instances
}

// TestFitSaysWhatMakesRoom: /api/fit of a model that does not fit this
// machine beside the provider's models names the ones a request would
// stop, instead of only the shortfall; pinned ones stay, and then it says
// what holds the memory.
func TestFitSaysWhatMakesRoom(t *testing.T) {
	l := newFakeLoader(t, 1<<50, map[string]int64{"a": 30 << 30, "b": 1 << 30})
	srv, pool := providerServer(t, l, PoolConfig{})
	streamed(t, mustChat(t, srv.URL, "a"))
	streamed(t, mustChat(t, srv.URL, "b"))
	fit := func(target string) map[string]any {
		resp, err := http.Get(srv.URL + target)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v", target, resp.StatusCode, err)
		}
		return out
	}
	const big = "/api/fit?model=llama-3.3-70b-instruct/Q4_K_M&ctx=4096"
	out := fit(big)
	room, _ := out["make_room"].(map[string]any)
	if out["verdict"] != "does_not_fit" || room == nil || !slices.Equal(toStrings(room["stop"]), []string{"a"}) {
		t.Fatalf("verdict %v, make_room %v; want a stopped", out["verdict"], out["make_room"])
	}
	// For a preset the provider's models are not on that machine.
	if out := fit(big + "&machine=cpu-32"); out["make_room"] != nil {
		t.Errorf("make_room for a preset: %v", out["make_room"])
	}
	if err := pool.SetPinned("a", true); err != nil {
		t.Fatal(err)
	}
	room, _ = fit(big)["make_room"].(map[string]any)
	if room == nil || len(toStrings(room["stop"])) != 0 || !strings.Contains(room["says"].(string), "kept: a (pinned)") {
		t.Errorf("with a pinned: %v", room)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestModelsServableFirst: /v1/models lists what is loaded, then what
// loads without a download, then the catalog's to download with their
// size, then the disabled; --hide-remote leaves the third out.
func TestModelsServableFirst(t *testing.T) {
	l := newFakeLoader(t, 1000*mib, map[string]int64{"a": 100 * mib, "b": 100 * mib})
	pool := NewPool(PoolConfig{Loader: l, Models: []ServedModel{{Name: "a", Ref: "a"}, {Name: "b", Ref: "b"}}})
	t.Cleanup(func() { pool.Close(t.Context()) })
	for _, hide := range []bool{false, true} {
		h := newTestHandler(t, func(c *Config) {
			c.Pool, c.HideRemote = pool, hide
			c.Local = func(v string) bool { return v == "qwen3-0.6b/Q8_0" }
		})
		srv := httptest.NewServer(h)
		defer srv.Close()
		if !hide {
			// Loaded, both: one listed unloaded would be judged by
			// opening it, which this server cannot.
			streamed(t, mustChat(t, srv.URL, "a"))
			streamed(t, mustChat(t, srv.URL, "b"))
		}
		_, _, body := do(t, h, "GET", "/v1/models", "", nil)
		list := decode[modelList](t, body)
		group := func(mo modelObject) int {
			switch {
			case mo.Status == "disabled":
				return 3
			case mo.State == StateLoaded:
				return 0
			case !mo.Remote:
				return 1
			}
			return 2
		}
		var groups []int
		remote := 0
		for _, mo := range list.Data {
			groups = append(groups, group(mo))
			if mo.Remote {
				remote++
				if mo.DownloadBytes <= 0 {
					t.Errorf("%s is remote with no download size", mo.ID)
				}
			}
		}
		if !slices.IsSorted(groups) || list.Data[0].ID != "a" || list.Data[1].ID != "b" {
			t.Errorf("hide %v: order %v, first %s %s", hide, groups, list.Data[0].ID, list.Data[1].ID)
		}
		if local := slices.IndexFunc(list.Data, func(mo modelObject) bool { return mo.ID == "qwen3-0.6b/Q8_0" }); local < 0 || group(list.Data[local]) != 1 {
			t.Errorf("hide %v: the variant in the store is not among the local ones", hide)
		}
		if hide != (remote == 0) {
			t.Errorf("hide %v: %d remote listed", hide, remote)
		}
	}
}

// TestMetrics: /metrics in Prometheus' text format, every sample of a
// family after its TYPE line, with the provider's bookings, states,
// loads, evictions and refusals.
func TestMetrics(t *testing.T) {
	l := newFakeLoader(t, 250*mib, map[string]int64{"a": 100 * mib, "b": 100 * mib, "c": 100 * mib, "huge": 500 * mib})
	srv, _ := providerServer(t, l, PoolConfig{})
	for _, m := range []string{"a", "b", "c"} {
		streamed(t, mustChat(t, srv.URL, m))
	}
	if resp, err := chat(srv.URL, "huge", false); err == nil {
		resp.Body.Close()
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q", ct)
	}
	samples := map[string]string{}
	typed := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			typed[strings.Fields(f)[0]] = true
			continue
		}
		if strings.HasPrefix(line, "# HELP ") {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		family, _, _ := strings.Cut(name, "{")
		family = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(family, "_bucket"), "_sum"), "_count")
		if !ok || !typed[family] {
			t.Errorf("sample %q before its family's TYPE", line)
		}
		samples[name] = value
	}
	for name, want := range map[string]string{
		`headroom_model_booked_bytes{model="b",domain="ram"}`: "1.048576e+08",
		`headroom_booked_bytes{domain="ram"}`:                 "2.097152e+08",
		`headroom_models{state="loaded"}`:                     "2",
		`headroom_models{state="unloaded"}`:                   "1",
		`headroom_stops_total{reason="eviction"}`:             "1",
		`headroom_refusals_total{reason="does_not_fit"}`:      "1",
		`headroom_load_seconds_count`:                         "3",
		`headroom_load_seconds_bucket{le="+Inf"}`:             "3",
		`headroom_load_seconds_bucket{le="1"}`:                "3",
		`headroom_requests_in_flight{model="c"}`:              "0",
		`headroom_domain_capacity_bytes{domain="ram"}`:        "",
	} {
		got, ok := samples[name]
		if !ok || want != "" && got != want {
			t.Errorf("%s = %q (present %v), want %q", name, got, ok, want)
		}
	}
}
