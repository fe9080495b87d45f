package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/source"
)

const mib = 1 << 20

// fakeLoader admits models against one domain of capacity bytes, as the
// ledger does (what each live child books is held back), and starts each
// as an httptest server that answers the OpenAI endpoints.
type fakeLoader struct {
	capacity int64
	need     map[string]int64 // by ref
	// gate, when set, holds each chat stream after its first event until
	// it is closed.
	gate chan struct{}
	// loadDelay is how long each load takes.
	loadDelay time.Duration
	// handlerOverride, when set, is every child's handler.
	handlerOverride http.Handler
	// failLoad names a model whose load fails once under way.
	failLoad string

	mu        sync.Mutex
	live      map[string]*fakeChild
	loads     []string
	cancelled int // upstream requests whose client went away
}

type fakeChild struct {
	srv     *httptest.Server
	booking admission.Booking
	exited  chan struct{}
	once    sync.Once
	l       *fakeLoader
}

func (c *fakeChild) URL() string                { return c.srv.URL }
func (c *fakeChild) Booking() admission.Booking { return c.booking }
func (c *fakeChild) Flags() []string            { return []string{"-c", "4096"} }
func (c *fakeChild) Exited() <-chan struct{}    { return c.exited }
func (c *fakeChild) Stop(ctx context.Context) error {
	c.kill()
	c.l.mu.Lock()
	delete(c.l.live, c.booking.ID)
	c.l.mu.Unlock()
	return nil
}

// kill ends the server as a SIGKILL would: connections cut, Exited closed,
// the booking still held until Stop.
func (c *fakeChild) kill() {
	c.once.Do(func() {
		c.srv.CloseClientConnections()
		c.srv.Close()
		close(c.exited)
	})
}

func newFakeLoader(t testing.TB, capacity int64, need map[string]int64) *fakeLoader {
	return &fakeLoader{capacity: capacity, need: need, live: map[string]*fakeChild{}}
}

func (l *fakeLoader) used() int64 {
	var n int64
	for _, c := range l.live {
		n += c.booking.Need["ram"]
	}
	return n
}

func (l *fakeLoader) Load(ctx context.Context, m ServedModel, room Room) (Child, error) {
	need, ok := l.need[m.Ref]
	if !ok {
		return nil, fmt.Errorf("fake loader: no model %s", m.Ref)
	}
	if need > l.capacity {
		return nil, &Refused{Reason: fmt.Sprintf("%s does not fit this machine even alone: ram is short by %d MiB", m.Ref, (need-l.capacity)>>20)}
	}
	for try := 0; ; try++ {
		l.mu.Lock()
		avail := l.capacity - l.used()
		l.mu.Unlock()
		if need <= avail {
			break
		}
		if try == 3 {
			return nil, errors.New("fake loader: still no room")
		}
		a := &plan.Assessment{Verdict: plan.DoesNotFit, Domains: []hw.DomainUse{{ID: "ram", Required: need, Available: avail, Margin: avail - need}}}
		if err := room.Evict(ctx, &admission.Refusal{Model: m.Ref, Assessment: a}); err != nil {
			return nil, err
		}
	}
	if room.Progress != nil {
		room.Progress(Progress{Step: "loading", Detail: "text_model", Percent: 50})
	}
	select {
	case <-time.After(l.loadDelay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if m.Ref == l.failLoad {
		return nil, errors.New("llama-server exited while loading")
	}
	c := &fakeChild{exited: make(chan struct{}), l: l}
	c.srv = httptest.NewServer(l.handler(m.Name))
	l.mu.Lock()
	defer l.mu.Unlock()
	c.booking = admission.Booking{ID: fmt.Sprintf("b%d", len(l.loads)+1), Model: m.Ref, Need: map[string]int64{"ram": need}, Started: true}
	l.live[c.booking.ID] = c
	l.loads = append(l.loads, m.Name)
	return c, nil
}

func (l *fakeLoader) child(model string) *fakeChild {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.live {
		if c.booking.Model == model {
			return c
		}
	}
	return nil
}

// handler answers like llama-server: a stream of chat chunks, or one
// answer, naming the model it was started as.
func (l *fakeLoader) handler(name string) http.Handler {
	if l.handlerOverride != nil {
		return l.handlerOverride
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool `json:"stream"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"object":"chat.completion","model":%q,"choices":[{"message":{"role":"assistant","content":"hello"}}]}`, name)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: {\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"delta\":{\"content\":\"t%d\"}}]}\n\n", name, i)
			w.(http.Flusher).Flush()
			if i == 0 && l.gate != nil {
				select {
				case <-l.gate:
				case <-r.Context().Done():
					l.mu.Lock()
					l.cancelled++
					l.mu.Unlock()
					return
				}
			}
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	mux.HandleFunc("POST /v1/embeddings", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"embedding":[0.5]}]}`)
	})
	return mux
}

// providerServer is the API with a pool over l, served on loopback.
func providerServer(t testing.TB, l *fakeLoader, cfg PoolConfig) (*httptest.Server, *Pool) {
	t.Helper()
	cfg.Loader = l
	if cfg.Accept == nil {
		cfg.Accept = func(ref string) error {
			if _, ok := l.need[ref]; !ok {
				return fmt.Errorf("%q: %w", ref, ErrUnknownModel)
			}
			return nil
		}
	}
	pool := NewPool(cfg)
	h := newTestHandler(t, func(c *Config) { c.Pool = pool })
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		pool.Close(context.Background())
	})
	return srv, pool
}

func chat(url, model string, stream bool) (*http.Response, error) {
	body := fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, model, stream)
	return http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
}

// streamStarted asks model for a streamed chat and reads its first event,
// which the fake child sends before its gate.
func streamStarted(t *testing.T, url, model string) (*http.Response, *bufio.Reader) {
	t.Helper()
	resp, err := chat(url, model, true)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if line, _ := firstData(br); !strings.Contains(line, `"t0"`) {
		t.Fatalf("first event %q", line)
	}
	return resp, br
}

// firstData reads a stream up to its first data line, past the progress
// comments of a load and the blank lines that end them.
func firstData(br *bufio.Reader) (string, error) {
	for {
		line, err := br.ReadString('\n')
		if err != nil || (line != "\n" && !strings.HasPrefix(line, ":")) {
			return line, err
		}
	}
}

// streamed reads a whole event stream: the data of each event.
func streamed(t *testing.T, resp *http.Response) []string {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	return out
}

func states(pool *Pool) map[string]string {
	out := map[string]string{}
	for _, m := range pool.Models() {
		out[m.Name] = m.State
	}
	return out
}

func eventKinds(pool *Pool) []string {
	var out []string
	for _, e := range pool.Events() {
		out = append(out, e.Kind+" "+e.Model)
	}
	return out
}

func TestProviderLoadsOnDemandAndEvictsByMemory(t *testing.T) {
	// Room for two of a, b, c (100 MiB each) and never for huge.
	l := newFakeLoader(t, 250*mib, map[string]int64{"a": 100 * mib, "b": 100 * mib, "c": 100 * mib, "huge": 300 * mib})
	srv, pool := providerServer(t, l, PoolConfig{})
	for _, m := range []string{"a", "b"} {
		resp, err := chat(srv.URL, m, true)
		if err != nil {
			t.Fatal(err)
		}
		got := streamed(t, resp)
		if len(got) != 4 || got[3] != "[DONE]" || !strings.Contains(got[0], `"model":"`+m+`"`) {
			t.Fatalf("stream from %s: %q", m, got)
		}
	}
	if s := states(pool); s["a"] != StateLoaded || s["b"] != StateLoaded {
		t.Fatalf("after a and b: %v", s)
	}
	// c needs 100 MiB with 50 free: one must go, and a is the older.
	resp, err := chat(srv.URL, "c", false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"content":"hello"`) {
		t.Fatalf("c: %d %s", resp.StatusCode, b)
	}
	if s := states(pool); s["a"] != StateUnloaded || s["b"] != StateLoaded || s["c"] != StateLoaded {
		t.Errorf("after c: %v, want a evicted, b and c loaded", s)
	}
	evs := pool.Events()
	i := slices.IndexFunc(evs, func(e Event) bool { return e.Kind == "eviction" })
	if i < 0 || evs[i].Model != "a" || !strings.Contains(evs[i].Reason, "for c (ram short by 50 MiB)") || evs[i].Memory["ram"] != 100*mib {
		t.Errorf("events %+v: want a's eviction for c with its reason and memory", evs)
	}
	// huge cannot fit even alone: 503 at once, nothing stopped.
	resp, err = chat(srv.URL, "huge", false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(b), "short by 50 MiB") {
		t.Errorf("huge: %d %s, want 503 with the shortfall", resp.StatusCode, b)
	}
	if s := states(pool); s["b"] != StateLoaded || s["c"] != StateLoaded {
		t.Errorf("after huge was refused: %v, want b and c still loaded", s)
	}
	if k := eventKinds(pool); !slices.Equal(k, []string{"load a", "load b", "eviction a", "load c", "refusal huge"}) {
		t.Errorf("events %q", k)
	}
}

func TestProviderPinnedNeverEvicted(t *testing.T) {
	l := newFakeLoader(t, 250*mib, map[string]int64{"a": 100 * mib, "b": 100 * mib, "c": 100 * mib, "d": 200 * mib})
	srv, pool := providerServer(t, l, PoolConfig{Models: []ServedModel{{Name: "a", Ref: "a", Pinned: true}}})
	for _, m := range []string{"a", "b", "c"} {
		resp, err := chat(srv.URL, m, false)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", m, resp, err)
		}
		resp.Body.Close()
	}
	if s := states(pool); s["a"] != StateLoaded || s["b"] != StateUnloaded || s["c"] != StateLoaded {
		t.Errorf("%v: want the pinned a kept and b evicted although a is older", s)
	}
	// d needs 200 MiB: only with a gone, and a is pinned.
	resp, err := chat(srv.URL, "d", false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(b), "a (pinned)") || !strings.Contains(string(b), "nothing was stopped") {
		t.Errorf("d: %d %s, want 503 naming the pinned model", resp.StatusCode, b)
	}
	if s := states(pool); s["a"] != StateLoaded || s["c"] != StateLoaded {
		t.Errorf("after d was refused: %v", s)
	}
}

// A model answering a request is stopped for a load only when idle ones
// do not make room, and only after its answer is complete: the load waits
// for it rather than refusing.
func TestProviderLoadWaitsForBusy(t *testing.T) {
	l := newFakeLoader(t, 250*mib, map[string]int64{"a": 100 * mib, "c": 200 * mib})
	l.gate = make(chan struct{})
	// Opened on every way out, so that a failure does not leave the
	// stream (and the test server's Close) waiting for ever.
	open := sync.OnceFunc(func() { close(l.gate) })
	defer open()
	srv, pool := providerServer(t, l, PoolConfig{})
	resp, br := streamStarted(t, srv.URL, "a")
	type answer struct {
		status int
		body   string
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := chat(srv.URL, "c", false)
		if err != nil {
			done <- answer{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- answer{status: resp.StatusCode, body: string(b)}
	}()
	// c waits while a streams: a is stopping, not stopped, and c is not
	// refused.
	deadline := time.Now().Add(5 * time.Second)
	for states(pool)["a"] != StateStopping {
		if time.Now().After(deadline) {
			t.Fatalf("a never began stopping for c: %v", states(pool))
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case a := <-done:
		t.Fatalf("c answered %d %s %v while a was still streaming", a.status, a.body, a.err)
	case <-time.After(100 * time.Millisecond):
	}
	open()
	rest, err := io.ReadAll(br)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(rest), "[DONE]") {
		t.Errorf("a's stream was cut by the eviction: %q %v", rest, err)
	}
	a := <-done
	if a.err != nil || a.status != 200 || !strings.Contains(a.body, `"content":"hello"`) {
		t.Fatalf("c: %d %s %v", a.status, a.body, a.err)
	}
	if s := states(pool); s["a"] != StateUnloaded || s["c"] != StateLoaded {
		t.Errorf("states %v, want a stopped for c", s)
	}
}

func TestProviderClientGoneCancelsUpstream(t *testing.T) {
	l := newFakeLoader(t, 250*mib, map[string]int64{"a": 100 * mib})
	l.gate = make(chan struct{})
	defer close(l.gate)
	srv, pool := providerServer(t, l, PoolConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"a","stream":true}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// The first event arrives while the child holds the rest back: each
	// chunk is flushed as it comes.
	line, err := firstData(bufio.NewReader(resp.Body))
	if err != nil || !strings.Contains(line, `"t0"`) {
		t.Fatalf("first event %q, %v", line, err)
	}
	if m := pool.Models(); m[0].InFlight != 1 {
		t.Errorf("in flight %d, want 1", m[0].InFlight)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l.mu.Lock()
		n := l.cancelled
		l.mu.Unlock()
		if n == 1 && pool.Models()[0].InFlight == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstream cancelled %d times, in flight %d: the client's hang-up did not reach the child", n, pool.Models()[0].InFlight)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProviderChildKilledMidStream(t *testing.T) {
	l := newFakeLoader(t, 250*mib, map[string]int64{"a": 100 * mib})
	l.gate = make(chan struct{})
	srv, pool := providerServer(t, l, PoolConfig{})
	resp, br := streamStarted(t, srv.URL, "a")
	l.child("a").kill()
	rest, err := io.ReadAll(br)
	resp.Body.Close()
	if err == nil && !strings.Contains(string(rest), "stopped in the middle") {
		t.Errorf("after the kill the client read %q and no error", rest)
	}
	if strings.Contains(string(rest), "[DONE]") {
		t.Errorf("a cut stream ended as if whole: %q", rest)
	}
	// The booking is given back and the next request loads it again.
	deadline := time.Now().Add(5 * time.Second)
	for states(pool)["a"] != StateUnloaded {
		if time.Now().After(deadline) {
			t.Fatalf("state %v after the kill", states(pool))
		}
		time.Sleep(10 * time.Millisecond)
	}
	l.mu.Lock()
	held := len(l.live)
	l.mu.Unlock()
	if held != 0 {
		t.Errorf("%d bookings held after the child died", held)
	}
	close(l.gate)
	resp, err = chat(srv.URL, "a", true)
	if err != nil {
		t.Fatal(err)
	}
	if got := streamed(t, resp); len(got) != 4 {
		t.Errorf("after the reload: %q", got)
	}
	if k := eventKinds(pool); !slices.Equal(k, []string{"load a", "exit a", "load a"}) {
		t.Errorf("events %q", k)
	}
}

func TestProviderQueueBound(t *testing.T) {
	l := newFakeLoader(t, 250*mib, map[string]int64{"a": 100 * mib})
	l.loadDelay = 500 * time.Millisecond
	srv, _ := providerServer(t, l, PoolConfig{Queue: 2})
	var wg sync.WaitGroup
	codes := make([]int, 4)
	retry := make([]string, 4)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i > 0 {
				time.Sleep(100 * time.Millisecond) // after the first started the load
			}
			resp, err := chat(srv.URL, "a", false)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[i], retry[i] = resp.StatusCode, resp.Header.Get("Retry-After")
		}()
	}
	wg.Wait()
	ok, busy := 0, 0
	for i, c := range codes {
		switch {
		case c == 200:
			ok++
		case c == 503 && retry[i] != "":
			busy++
		default:
			t.Errorf("request %d: %d", i, c)
		}
	}
	if ok != 2 || busy != 2 {
		t.Errorf("codes %v: want two served (the queue's bound) and two 503 with Retry-After", codes)
	}
}

func TestProviderIdleTimeout(t *testing.T) {
	l := newFakeLoader(t, 250*mib, map[string]int64{"a": 100 * mib, "p": 100 * mib})
	srv, pool := providerServer(t, l, PoolConfig{Idle: 200 * time.Millisecond, Models: []ServedModel{{Name: "p", Ref: "p", Pinned: true, Idle: 200 * time.Millisecond}}})
	for _, m := range []string{"a", "p"} {
		resp, err := chat(srv.URL, m, false)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
		resp.Body.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for states(pool)["a"] != StateUnloaded {
		if time.Now().After(deadline) {
			t.Fatalf("a still %s past its idle time-out", states(pool)["a"])
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s := states(pool)["p"]; s != StateLoaded {
		t.Errorf("the pinned p is %s, want loaded", s)
	}
}

func TestProviderRequests(t *testing.T) {
	l := newFakeLoader(t, 250*mib, map[string]int64{"a": 100 * mib})
	srv, _ := providerServer(t, l, PoolConfig{})
	bare := httptest.NewServer(newTestHandler(t, nil))
	defer bare.Close()
	post := func(base, path, ct, body string, hdr ...string) (int, string) {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tt := range []struct {
		name, base, path, ct, body string
		hdr                        []string
		status                     int
		says                       string
	}{
		{"embeddings", srv.URL, "/v1/embeddings", "application/json", `{"model":"a","input":"x"}`, nil, 200, `"embedding"`},
		{"unknown model", srv.URL, "/v1/chat/completions", "application/json", `{"model":"zzz"}`, nil, 404, "no such model"},
		{"no model", srv.URL, "/v1/completions", "application/json", `{"prompt":"x"}`, nil, 400, "model is required"},
		{"not JSON", srv.URL, "/v1/completions", "application/json", `model=a`, nil, 400, "JSON object"},
		{"empty", srv.URL, "/v1/completions", "application/json", ``, nil, 400, "empty"},
		{"too big", srv.URL, "/v1/chat/completions", "application/json", `{"model":"a","x":"` + strings.Repeat("a", maxBody) + `"}`, nil, 413, "larger"},
		{"form", srv.URL, "/v1/chat/completions", "application/x-www-form-urlencoded", `model=a`, nil, 415, "application/json"},
		{"foreign origin", srv.URL, "/v1/chat/completions", "application/json", `{"model":"a"}`, []string{"Origin", "http://evil.example"}, 403, "Origin"},
		{"without a pool", bare.URL, "/v1/chat/completions", "application/json", `{"model":"a"}`, nil, 501, "without a runtime"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := post(tt.base, tt.path, tt.ct, tt.body, tt.hdr...)
			if code != tt.status || !strings.Contains(body, tt.says) {
				t.Errorf("%d %s, want %d saying %q", code, body, tt.status, tt.says)
			}
		})
	}
}

func TestProviderListsAndShows(t *testing.T) {
	l := newFakeLoader(t, 250*mib, map[string]int64{"qwen3-0.6b/Q4_K_M": 100 * mib})
	srv, _ := providerServer(t, l, PoolConfig{})
	resp, err := chat(srv.URL, "qwen3-0.6b/Q4_K_M", false)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
	get := func(path string, v any) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	var list modelList
	get("/v1/models", &list)
	states := map[string]int{}
	for _, m := range list.Data {
		states[m.State]++
		if m.ID == "qwen3-0.6b/Q4_K_M" && m.State != StateLoaded {
			t.Errorf("%s is %s, want loaded", m.ID, m.State)
		}
		if (m.Status == "disabled") != (m.State == "disabled") {
			t.Errorf("%s: status %s, state %s", m.ID, m.Status, m.State)
		}
	}
	if states[StateLoaded] != 1 || states[StateUnloaded] == 0 {
		t.Errorf("states %v", states)
	}
	var inst instancesJSON
	get("/api/instances", &inst)
	if len(inst.Instances) != 1 || inst.Instances[0].Memory["ram"] != 100*mib || inst.Instances[0].LastUsed == nil || !inst.Instances[0].Served {
		t.Errorf("instances %+v", inst.Instances)
	}
	if len(inst.Events) != 1 || inst.Events[0].Kind != "load" {
		t.Errorf("events %+v", inst.Events)
	}
}

// TestProviderLogLinesCannotBeForged: a model name with a line break, in
// a request, reaches serve-api's log on one line: the break is escaped,
// and no line of the log starts with what followed it.
func TestProviderLogLinesCannotBeForged(t *testing.T) {
	forged := "a\r\nload forged: ready on http://evil"
	l := newFakeLoader(t, 250*mib, map[string]int64{forged: 100 * mib})
	var mu sync.Mutex
	var logged []string
	srv, _ := providerServer(t, l, PoolConfig{Log: func(line string) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, line)
	}})
	for _, m := range []string{forged, "b\nrefusal x: forged"} {
		resp, err := chat(srv.URL, m, false)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logged) == 0 {
		t.Fatal("nothing was logged")
	}
	for _, line := range logged {
		if strings.ContainsAny(line, "\r\n") {
			t.Errorf("a logged line holds a line break: %q", line)
		}
	}
}

// TestProviderBadReferenceIs400: a name that is no model reference at all
// (file://) is the request's fault on /v1/chat/completions, as on
// /api/load: 400, not 502.
func TestProviderBadReferenceIs400(t *testing.T) {
	l := newFakeLoader(t, 250*mib, map[string]int64{"a": 100 * mib})
	srv, _ := providerServer(t, l, PoolConfig{Accept: func(ref string) error {
		_, err := source.ParseRef(ref)
		return err
	}})
	resp, err := chat(srv.URL, "file:///etc/passwd", false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "invalid model reference") {
		t.Errorf("file://: %d %s, want 400 saying the reference is invalid", resp.StatusCode, b)
	}
}

// TestProviderNamesDoNotPileUp: a name whose load fails leaves no entry
// behind (300 names of nothing leave none), the entries requests made
// that stand unloaded are bounded (100 models loaded one after another
// leave at most maxRequested), and one store file named four ways is one
// entry and one load.
func TestProviderNamesDoNotPileUp(t *testing.T) {
	need := map[string]int64{"/s/m.gguf": 10 * mib}
	for i := range 100 {
		need[fmt.Sprintf("ok-%d", i)] = 100 * mib
	}
	l := newFakeLoader(t, 150*mib, need)
	srv, pool := providerServer(t, l, PoolConfig{
		Accept:    func(string) error { return nil },
		Canonical: func(ref string) string { return path.Clean(ref) },
	})
	ask := func(m string) int {
		resp, err := chat(srv.URL, m, false)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 300 {
		if code := ask(fmt.Sprintf("hf:nobody/missing-%d", i)); code == 200 {
			t.Fatalf("a missing model answered 200")
		}
	}
	if n := len(pool.Models()); n != 0 {
		t.Errorf("after 300 failed names the pool lists %d models, want none", n)
	}
	for i := range 100 {
		if code := ask(fmt.Sprintf("ok-%d", i)); code != 200 {
			t.Fatalf("ok-%d: %d", i, code)
		}
	}
	if n := len(pool.Models()); n > maxRequested+1 {
		t.Errorf("after 100 models loaded in turn the pool lists %d, want at most %d", n, maxRequested+1)
	}
	for _, m := range []string{"/s/m.gguf", "/s//m.gguf", "/s/./m.gguf", "/s/x/../m.gguf"} {
		if code := ask(m); code != 200 {
			t.Fatalf("%s: %d", m, code)
		}
	}
	loads := 0
	for _, k := range eventKinds(pool) {
		if k == "load /s/m.gguf" {
			loads++
		}
	}
	if loads != 1 {
		t.Errorf("one file named four ways was loaded %d times, want once (events %q)", loads, eventKinds(pool))
	}
}

// TestModelsJudgedAsLoaded: /v1/models judges a model the pool serves
// with the options the runtime loads it with (serve-api's -np, -c,
// --min-ctx), not the default search: the same model is available under
// the defaults and disabled under options no plan can meet on the
// machine. Two listings open the model once (the opener keeps it;
// TestJudgementsKept holds the judgement kept).
func TestModelsJudgedAsLoaded(t *testing.T) {
	const ref = "hf:example/tiny-GGUF:Q4_K_M"
	for _, tc := range []struct {
		name   string
		search *plan.SearchOptions
		status string
	}{
		{"defaults", nil, "available"},
		{"serve-api's options", func() *plan.SearchOptions {
			o := plan.DefaultSearch()
			o.Parallel, o.MinCtx = 256, 1<<20 // 256 slots of a million cells: no machine holds them
			return &o
		}(), "disabled"},
	} {
		var opened atomic.Int32
		l := newFakeLoader(t, 250*mib, map[string]int64{ref: 100 * mib})
		pool := NewPool(PoolConfig{Loader: l, Models: []ServedModel{{Name: ref, Ref: ref}}})
		t.Cleanup(func() { pool.Close(context.Background()) })
		h := newTestHandler(t, func(c *Config) {
			open := fakeOpen(c.Catalog, c.Lock)
			c.Open = func(ctx context.Context, r string) (*arch.Model, error) {
				opened.Add(1)
				return open(ctx, r)
			}
			c.Pool, c.Search = pool, tc.search
		})
		for range 2 {
			status, _, body := do(t, h, "GET", "/v1/models", "", nil)
			if status != 200 {
				t.Fatalf("%s: %d %s", tc.name, status, body)
			}
			list := decode[modelList](t, body)
			i := slices.IndexFunc(list.Data, func(m modelObject) bool { return m.ID == ref })
			if i < 0 || list.Data[i].Status != tc.status {
				t.Errorf("%s: %+v, want %s", tc.name, list.Data, tc.status)
			}
		}
		if n := opened.Load(); n != 1 {
			t.Errorf("%s: two listings opened the model %d times, want once", tc.name, n)
		}
	}
}

// TestJudgementsKept: a model's judgement is made once per machine within
// judgeTTL (a second listing plans nothing), and apart for another
// machine; a kept judgement keeps the listing's live state unless it
// disables the model.
func TestJudgementsKept(t *testing.T) {
	j := &judgements{at: map[string]judgement{}}
	made := 0
	fresh := func(mo *modelObject) { made++; mo.Status, mo.Reason = "available", "fits" }
	for range 3 {
		mo := modelObject{ID: "m", State: StateUnloaded}
		j.judge("m\x00\x00here", &mo, fresh)
		if mo.Reason != "fits" || mo.State != StateUnloaded {
			t.Errorf("listing: %+v", mo)
		}
	}
	if made != 1 {
		t.Errorf("three listings judged %d times, want once", made)
	}
	mo := modelObject{ID: "m"}
	j.judge("m\x00rtx-4090\x00", &mo, fresh)
	if made != 2 {
		t.Errorf("another machine's listing reused this machine's judgement")
	}
}
