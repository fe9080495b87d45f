package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/hw"
)

// testHost names the snapshot the fake Machine returns, so a test can tell
// it from a preset.
const testHost = "test-box"

// localMachine is the fake Machine: the cpu-32 preset, relabelled as a
// probe of this machine.
func localMachine(context.Context) (*hw.Snapshot, error) {
	s, err := hw.LoadMachine("cpu-32")
	if err != nil {
		return nil, err
	}
	s.Source, s.Preset, s.Host = "probe", "", testHost
	return s, nil
}

// fakeRuntime admits anything but models named refuse/..., fails models
// named fail/..., and knows the instances it loaded.
type fakeRuntime struct {
	mu    sync.Mutex
	loads []LoadRequest
	live  map[string]Instance
}

func newFakeRuntime() *fakeRuntime { return &fakeRuntime{live: map[string]Instance{}} }

func (f *fakeRuntime) Load(ctx context.Context, req LoadRequest) (*Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loads = append(f.loads, req)
	switch {
	case strings.HasPrefix(req.Model, "refuse/"):
		return nil, &Refused{Reason: "gpu0 is short by 3.20 GiB"}
	case strings.HasPrefix(req.Model, "fail/"):
		return nil, errors.New("llama-server exited with status 1")
	case strings.HasPrefix(req.Model, "/"):
		return nil, fmt.Errorf("%s: only files inside the store: %w", req.Model, ErrForbidden)
	}
	inst := Instance{ID: "i1", Model: req.Model, State: "ready", URL: "http://127.0.0.1:9000", Flags: []string{"-c", "8192"}}
	f.live[inst.ID] = inst
	return &inst, nil
}

func (f *fakeRuntime) Unload(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.live[id]; !ok {
		return ErrUnknownInstance
	}
	delete(f.live, id)
	return nil
}

func (f *fakeRuntime) Instances() []Instance {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Instance
	for _, i := range f.live {
		out = append(out, i)
	}
	return out
}

// fakeOpen knows two references outside the catalog: one that is a
// catalog variant's model under another name, and one whose architecture
// headroom cannot model.
func fakeOpen(cat *catalog.Catalog, lock *catalog.LockFile) func(context.Context, string) (*arch.Model, error) {
	return func(ctx context.Context, ref string) (*arch.Model, error) {
		switch ref {
		case "hf:example/tiny-GGUF:Q4_K_M":
			e := cat.Entry("qwen3-0.6b")
			m, _, _, err := cat.Model(e, *e.Variant("Q4_K_M"), lock)
			return m, err
		case "hf:example/strange-GGUF":
			return nil, &arch.Incompatible{Reason: "architecture \"strange\" is not modeled"}
		case "hf:example/offline":
			return nil, errors.New("the Hub did not answer")
		case "/etc/passwd":
			return nil, fmt.Errorf("%s: only files inside the store: %w", ref, ErrForbidden)
		}
		return nil, fmt.Errorf("no model %s in the store: %w", ref, fs.ErrNotExist)
	}
}

// newTestHandler builds the server with the built-in catalog; with is
// applied to the config first.
func newTestHandler(t testing.TB, with func(*Config)) http.Handler {
	t.Helper()
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	lock, err := catalog.LoadLock()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Machine: localMachine, Catalog: cat, Lock: lock}
	if with != nil {
		with(&cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// do serves one request and returns the status, headers and body.
func do(t *testing.T, h http.Handler, method, target, contentType string, body io.Reader) (int, http.Header, []byte) {
	t.Helper()
	req := httptest.NewRequest(method, target, body)
	req.Host = "127.0.0.1:8787" // the guard refuses httptest's example.com
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Header(), rec.Body.Bytes()
}

// decode unmarshals an answer, failing the test with the body on error.
func decode[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("answer is not the expected JSON: %v\n%s", err, body)
	}
	return v
}

// variantCount is the number of variants in the built-in catalog.
func variantCount(t *testing.T) int {
	t.Helper()
	return variantsWhere(t, func(*catalog.Entry) bool { return true })
}

// variantsWhere counts the catalog's variants of the entries keep takes.
func variantsWhere(t *testing.T, keep func(*catalog.Entry) bool) int {
	t.Helper()
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range cat.Entries {
		if keep(&cat.Entries[i]) {
			n += len(cat.Entries[i].Variants)
		}
	}
	return n
}
