package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/headroom-llm/headroom/report"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

// TestErrors pins every refusal: its status, its error type, and a message
// that says what was wrong.
func TestErrors(t *testing.T) {
	// A valid machine file outside any store: a request naming it must not
	// get its answer.
	snap, err := hw.LoadMachine("rtx-4090")
	if err != nil {
		t.Fatal(err)
	}
	snap.Host = "read-from-a-file"
	var buf bytes.Buffer
	if err := snap.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "box.json")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	rt := newFakeRuntime()
	withRuntime := newTestHandler(t, func(c *Config) {
		c.Runtime = rt
		c.Open = fakeOpen(c.Catalog, c.Lock)
	})
	bare := newTestHandler(t, nil)
	big := `{"model":"` + strings.Repeat("a", 2<<20) + `"}`

	tests := []struct {
		name        string
		h           http.Handler
		method      string
		target      string
		contentType string
		body        string
		chunked     bool // hide the body's length, as a streaming client would
		status      int
		typ         string
		says        string
	}{
		{"unknown model", bare, "GET", "/api/fit?model=nope/Q4_K_M&machine=rtx-4090", "", "", false, 404, "invalid_request_error", "not a catalog variant"},
		{"bad split", bare, "GET", "/api/fit?model=qwen3-8b/Q4_K_M&machine=rtx-4090&ts=3,x", "", "", false, 400, "invalid_request_error", "ts: want up to 64 comma-separated non-negative numbers"},
		{"bad expert layers", bare, "GET", "/api/fit?model=qwen3-8b/Q4_K_M&machine=rtx-4090&ncmoe=-2", "", "", false, 400, "invalid_request_error", "ncmoe"},
		{"unknown quant", bare, "GET", "/api/fit?model=qwen3-8b/Q3_K_S&machine=rtx-4090", "", "", false, 404, "invalid_request_error", "the catalog has no Q3_K_S variant of qwen3-8b (did you mean qwen3-8b/Q4_K_M? it has "},
		{"unknown model for plan", bare, "GET", "/api/plan?model=nope", "", "", false, 404, "invalid_request_error", "not a catalog variant"},
		{"open: outside the store", withRuntime, "GET", "/api/fit?model=/etc/passwd", "", "", false, 403, "forbidden", "only files inside the store"},
		{"open: not in store", withRuntime, "GET", "/api/fit?model=hf:example/missing", "", "", false, 404, "invalid_request_error", "hf:example/missing"},
		{"open: failure", withRuntime, "GET", "/api/fit?model=hf:example/offline", "", "", false, 400, "invalid_request_error", "did not answer"},
		{"plan of an incompatible model", withRuntime, "GET", "/api/plan?model=hf:example/strange-GGUF", "", "", false, 400, "invalid_request_error", "cannot be planned"},
		{"model missing", bare, "GET", "/api/fit?machine=rtx-4090", "", "", false, 400, "invalid_request_error", "model is required"},
		{"args: a refused flag", bare, "GET", "/api/fit?model=qwen3-8b/Q4_K_M&machine=rtx-4090&args=-sm%20row", "", "", false, 400, "invalid_request_error", "-sm: how layers are split"},
		{"args: a bad value", bare, "GET", "/api/fit?model=qwen3-8b/Q4_K_M&machine=rtx-4090&args=-fa%20maybe", "", "", false, 400, "invalid_request_error", "want on, off or auto"},
		{"ctx negative", bare, "GET", "/api/fit?model=qwen3-8b/Q4_K_M&ctx=-1", "", "", false, 400, "invalid_request_error", "ctx must be"},
		{"ctx not a number", bare, "GET", "/api/fit?model=qwen3-8b/Q4_K_M&ctx=8k", "", "", false, 400, "invalid_request_error", `"8k"`},
		{"ctx too large", bare, "GET", "/api/fit?model=qwen3-8b/Q4_K_M&ctx=16777217", "", "", false, 400, "invalid_request_error", "16777216"},
		{"parallel zero", bare, "GET", "/api/fit?model=qwen3-8b/Q4_K_M&parallel=0", "", "", false, 400, "invalid_request_error", "parallel"},
		{"parallel too many", bare, "GET", "/api/plan?model=qwen3-8b/Q4_K_M&parallel=257", "", "", false, 400, "invalid_request_error", "parallel"},
		{"ngl negative", bare, "GET", "/api/fit?model=qwen3-8b/Q4_K_M&ngl=-2", "", "", false, 400, "invalid_request_error", "ngl"},
		{"ngl word", bare, "GET", "/api/fit?model=qwen3-8b/Q4_K_M&ngl=most", "", "", false, 400, "invalid_request_error", "ngl"},
		{"cache type", bare, "GET", "/api/fit?model=qwen3-8b/Q4_K_M&ctk=q9_0", "", "", false, 400, "invalid_request_error", "ctk"},
		{"flash attention", bare, "GET", "/api/fit?model=qwen3-8b/Q4_K_M&fa=yes", "", "", false, 400, "invalid_request_error", "-fa, --flash-attn \"yes\": want on, off or auto"},
		{"quantized V without flash attention", bare, "GET", "/api/fit?model=qwen3-8b/Q4_K_M&machine=rtx-4090&ctv=q8_0&fa=off", "", "", false, 400, "invalid_request_error", "flash attention"},
		{"min_ctx too small", bare, "GET", "/api/plan?model=qwen3-8b/Q4_K_M&min_ctx=100", "", "", false, 400, "invalid_request_error", "min_ctx"},
		{"plan goal", bare, "GET", "/api/plan?model=qwen3-8b/Q4_K_M&goal=quality", "", "", false, 400, "invalid_request_error", "goal"},
		{"headless", bare, "GET", "/api/plan?model=qwen3-8b/Q4_K_M&headless=maybe", "", "", false, 400, "invalid_request_error", "headless"},
		{"recommend goal", bare, "GET", "/api/recommend?goal=cheap", "", "", false, 400, "invalid_request_error", "goal"},
		{"capability", bare, "GET", "/api/recommend?capability=tools,flying", "", "", false, 400, "invalid_request_error", "flying"},
		{"license", bare, "GET", "/api/recommend?license=proprietary", "", "", false, 400, "invalid_request_error", "proprietary"},
		{"unknown parameter", bare, "GET", "/api/fit?model=qwen3-8b/Q4_K_M&gpu=1", "", "", false, 400, "invalid_request_error", `unknown parameter "gpu"`},
		{"presets take no filter", bare, "GET", "/api/presets?goal=speed", "", "", false, 400, "invalid_request_error", `"goal"`},
		{"unknown parameter on models", bare, "GET", "/v1/models?limit=3", "", "", false, 400, "invalid_request_error", `"limit"`},
		{"unknown parameter on hw", bare, "GET", "/api/hw?preset=rtx-4090", "", "", false, 400, "invalid_request_error", `"preset"`},
		{"parameter twice", bare, "GET", "/api/hw?machine=rtx-4090&machine=cpu-32", "", "", false, 400, "invalid_request_error", "2 times"},
		{"parameter empty", bare, "GET", "/api/hw?machine=", "", "", false, 400, "invalid_request_error", "empty"},
		{"malformed query", bare, "GET", "/api/hw?machine=%zz", "", "", false, 400, "invalid_request_error", "malformed"},
		{"machine unknown", bare, "GET", "/api/hw?machine=rtx-9090", "", "", false, 404, "not_found", "rtx-4090"},
		{"machine relative path", bare, "GET", "/api/hw?machine=../../etc/passwd", "", "", false, 404, "not_found", "preset"},
		{"machine absolute path", bare, "GET", "/api/hw?machine=/etc/passwd", "", "", false, 404, "not_found", "preset"},
		{"machine file", bare, "GET", "/api/fit?model=qwen3-8b/Q4_K_M&machine=" + file, "", "", false, 404, "not_found", "preset"},
		{"machine dot path", bare, "GET", "/api/recommend?machine=./rtx-4090", "", "", false, 404, "not_found", "preset"},
		{"machine on models", bare, "GET", "/v1/models?machine=" + file, "", "", false, 404, "not_found", "preset"},
		{"wrong method", bare, "POST", "/api/fit?model=qwen3-8b/Q4_K_M", "", "", false, 405, "invalid_request_error", "want GET"},
		{"wrong method for load", withRuntime, "GET", "/api/load", "", "", false, 405, "invalid_request_error", "want POST"},
		{"wrong method for models", bare, "DELETE", "/v1/models", "", "", false, 405, "invalid_request_error", "want GET"},
		{"wrong method for the panel", bare, "POST", "/", "", "", false, 405, "invalid_request_error", "want GET"},
		{"unknown endpoint", bare, "GET", "/api/nothing", "", "", false, 404, "not_found", "/api/nothing"},
		{"unknown v1 endpoint", bare, "POST", "/v1/audio/speech", "", "", false, 404, "not_found", "/v1/audio/speech"},
		{"chat without a runtime", bare, "POST", "/v1/chat/completions", "application/json", `{"model":"qwen3-8b/Q4_K_M"}`, false, 501, "not_implemented", "without a runtime"},
		{"chat wrong method", bare, "GET", "/v1/chat/completions", "", "", false, 405, "invalid_request_error", "want POST"},
		{"load without runtime", bare, "POST", "/api/load", "application/json", `{"model":"qwen3-8b/Q4_K_M"}`, false, 501, "not_implemented", "without a runtime"},
		{"unload without runtime", bare, "POST", "/api/unload", "application/json", `{"id":"i1"}`, false, 501, "not_implemented", "without a runtime"},
		{"load outside the store", withRuntime, "POST", "/api/load", "application/json", `{"model":"/etc/passwd"}`, false, 403, "forbidden", "only files inside the store"},
		{"load refused", withRuntime, "POST", "/api/load", "application/json", `{"model":"refuse/this"}`, false, 409, "conflict", "gpu0 is short by 3.20 GiB"},
		{"load failed", withRuntime, "POST", "/api/load", "application/json", `{"model":"fail/this"}`, false, 500, "internal", "llama-server exited"},
		{"unload unknown", withRuntime, "POST", "/api/unload", "application/json", `{"id":"nope"}`, false, 404, "not_found", "nope"},
		{"unload without id", withRuntime, "POST", "/api/unload", "application/json", `{}`, false, 400, "invalid_request_error", "id or model is required"},
		{"body too large", withRuntime, "POST", "/api/load", "application/json", big, false, 413, "invalid_request_error", "larger"},
		{"body too large, streamed", withRuntime, "POST", "/api/load", "application/json", big, true, 413, "invalid_request_error", "larger"},
		{"unknown field", withRuntime, "POST", "/api/load", "application/json", `{"model":"qwen3-8b/Q4_K_M","gpu_layers":99}`, false, 400, "invalid_request_error", "gpu_layers"},
		{"two objects", withRuntime, "POST", "/api/load", "application/json", `{"model":"a/b"} {"model":"c/d"}`, false, 400, "invalid_request_error", "after the JSON object"},
		{"empty body", withRuntime, "POST", "/api/load", "application/json", ``, false, 400, "invalid_request_error", "empty"},
		{"not JSON", withRuntime, "POST", "/api/load", "application/json", `model=a/b`, false, 400, "invalid_request_error", "JSON"},
		{"wrong type", withRuntime, "POST", "/api/load", "application/json", `{"model":"a/b","ctx":"big"}`, false, 400, "invalid_request_error", "ctx"},
		{"form body", withRuntime, "POST", "/api/load", "application/x-www-form-urlencoded", `model=a/b`, false, 415, "invalid_request_error", "application/json"},
		{"load without model", withRuntime, "POST", "/api/load", "application/json", `{"ctx":4096}`, false, 400, "invalid_request_error", "model is required"},
		{"load ctx negative", withRuntime, "POST", "/api/load", "application/json", `{"model":"a/b","ctx":-1}`, false, 400, "invalid_request_error", "ctx"},
		{"load parallel too many", withRuntime, "POST", "/api/load", "application/json", `{"model":"a/b","parallel":1000}`, false, 400, "invalid_request_error", "parallel"},
		{"load with query", withRuntime, "POST", "/api/load?force=1", "application/json", `{"model":"a/b"}`, false, 400, "invalid_request_error", `takes no parameters`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body *bytes.Reader
			if tt.body != "" || tt.method == "POST" {
				body = bytes.NewReader([]byte(tt.body))
			}
			req, err := http.NewRequest(tt.method, "http://127.0.0.1:8787"+tt.target, nil)
			if err != nil {
				t.Fatal(err)
			}
			if body != nil {
				req.Body = io.NopCloser(body)
				req.ContentLength = int64(len(tt.body))
				if tt.chunked {
					req.ContentLength = -1
				}
			}
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			rec := httptest.NewRecorder()
			tt.h.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body.Bytes())
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			e := decode[errorBody](t, rec.Body.Bytes())
			if e.Error.Type != tt.typ {
				t.Errorf("error type %q, want %q", e.Error.Type, tt.typ)
			}
			// Every error has a code; an unknown model has OpenAI's.
			if want := errorCode(tt.status); tt.status == 404 && tt.typ == "invalid_request_error" {
				if e.Error.Code != CodeModelNotFound {
					t.Errorf("code %q, want %q", e.Error.Code, CodeModelNotFound)
				}
			} else if e.Error.Code != want {
				t.Errorf("code %q, want %q", e.Error.Code, want)
			}
			if !strings.Contains(e.Error.Message, tt.says) {
				t.Errorf("message %q does not say %q", e.Error.Message, tt.says)
			}
			if strings.Contains(e.Error.Message, "read-from-a-file") || strings.Contains(e.Error.Message, "root:") {
				t.Errorf("the answer shows a file's contents: %q", e.Error.Message)
			}
			if tt.status == 405 && rec.Header().Get("Allow") == "" {
				t.Error("405 without an Allow header")
			}
		})
	}
}

// TestHW pins that a preset is answered as 'headroom hw --json' prints it,
// and that without a preset the server asks its Machine.
func TestHW(t *testing.T) {
	h := newTestHandler(t, nil)
	want, err := hw.LoadMachine("rtx-4090")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := want.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"rtx-4090", "RTX-4090"} {
		status, _, body := do(t, h, "GET", "/api/hw?machine="+name, "", nil)
		if status != 200 {
			t.Fatalf("%s: status %d: %s", name, status, body)
		}
		if !bytes.Equal(body, buf.Bytes()) {
			t.Errorf("%s: the answer differs from headroom hw --json:\n%s\nwant\n%s", name, body, buf.Bytes())
		}
	}
	status, _, body := do(t, h, "GET", "/api/hw", "", nil)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	if s := decode[hw.Snapshot](t, body); s.Host != testHost || s.Source != "probe" {
		t.Errorf("without machine: host %q source %q, want this machine's snapshot (host %q)", s.Host, s.Source, testHost)
	}
}

// fitAnswer is what the tests read of /api/fit.
type fitAnswer struct {
	Artifact report.Artifact `json:"artifact"`
	Profile  plan.Profile    `json:"profile"`
	Verdict  string          `json:"verdict"`
	Reason   string          `json:"reason"`
	Limiting *string         `json:"limiting"`
	Domains  []hw.DomainUse  `json:"domains"`
	Buffers  json.RawMessage `json:"buffers"`
}

func TestFit(t *testing.T) {
	h := newTestHandler(t, func(c *Config) { c.Open = fakeOpen(c.Catalog, c.Lock) })
	cat, _ := catalog.Load()
	lock, _ := catalog.LoadLock()
	e := cat.Entry("qwen3-8b")
	m, _, _, err := cat.Model(e, *e.Variant("Q4_K_M"), lock)
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := hw.LoadMachine("rtx-4090")

	tests := []struct {
		name    string
		query   string
		profile func(*plan.Profile)
		check   func(t *testing.T, a fitAnswer)
	}{
		{"explicit profile", "model=qwen3-8b/Q4_K_M&machine=rtx-4090&ctx=8192&parallel=1",
			func(p *plan.Profile) { p.Ctx, p.Parallel = 8192, 1 }, nil},
		{"quant in lower case", "model=qwen3-8b/q4_k_m&machine=rtx-4090&ctx=8192&parallel=1",
			func(p *plan.Profile) { p.Ctx, p.Parallel = 8192, 1 }, nil},
		{"llama-server's automatic slots", "model=qwen3-8b/Q4_K_M&machine=rtx-4090&ctx=8192",
			func(p *plan.Profile) { p.Ctx, p.Parallel, p.KVUnified = 8192, 4, true },
			func(t *testing.T, a fitAnswer) {
				if a.Profile.Parallel != 4 || !a.Profile.KVUnified {
					t.Errorf("profile %+v, want 4 slots sharing one cache as the CLI's default", a.Profile)
				}
			}},
		{"no GPU layers", "model=qwen3-8b/Q4_K_M&machine=rtx-4090&ctx=4096&parallel=1&ngl=0",
			func(p *plan.Profile) { p.Ctx, p.Parallel, p.GPULayers = 4096, 1, 0 },
			func(t *testing.T, a fitAnswer) {
				for _, d := range a.Domains {
					if d.ID == "gpu0" && d.Model != 0 {
						t.Errorf("ngl=0 left %d bytes of weights on gpu0", d.Model)
					}
				}
			}},
		{"quantized cache", "model=qwen3-8b/Q4_K_M&machine=rtx-4090&ctx=32768&parallel=2&ctk=q8_0&ctv=q8_0&fa=on&ngl=all",
			func(p *plan.Profile) {
				p.Ctx, p.Parallel, p.CacheK, p.CacheV, p.FlashAttn = 32768, 2, "q8_0", "q8_0", plan.FlashOn
			}, nil},
		{"a model too large", "model=llama-3.3-70b-instruct/Q8_0&machine=rtx-4090&ctx=4096&parallel=1", nil,
			func(t *testing.T, a fitAnswer) {
				if a.Verdict != plan.DoesNotFit || a.Limiting == nil || *a.Limiting != "gpu0" {
					t.Errorf("verdict %q limiting %v, want does_not_fit on gpu0", a.Verdict, a.Limiting)
				}
			}},
		{"a layer split", "model=qwen3-8b/Q4_K_M&machine=2x-rtx-3090&ctx=8192&parallel=1&ts=30,7", nil,
			func(t *testing.T, a fitAnswer) {
				var gpu0, gpu1 int64
				for _, d := range a.Domains {
					switch d.ID {
					case "gpu0":
						gpu0 = d.Model
					case "gpu1":
						gpu1 = d.Model
					}
				}
				// 30 of 37 layers on the first card, the output layer on the second.
				if len(a.Profile.TensorSplit) != 2 || gpu0 < 2*gpu1 {
					t.Errorf("profile %+v, weights %d / %d: want the 30,7 split carried", a.Profile, gpu0, gpu1)
				}
			}},
		{"opened outside the catalog", "model=hf:example/tiny-GGUF:Q4_K_M&machine=rtx-4090&ctx=4096&parallel=1", nil,
			func(t *testing.T, a fitAnswer) {
				if a.Artifact.Ref != "hf:example/tiny-GGUF:Q4_K_M" || a.Artifact.Architecture != "qwen3" || a.Artifact.SizeBytes <= 0 || a.Verdict != plan.Fits {
					t.Errorf("artifact %+v verdict %q, want the opened model, fitting", a.Artifact, a.Verdict)
				}
			}},
		{"a llama.cpp command line, read as fit reads it", "model=qwen3-8b/Q4_K_M&machine=rtx-4090&args=" + url.QueryEscape("-c 8192 -np 2 -fa 1 -ctk q8_0 --jinja -t 4"), nil,
			func(t *testing.T, a fitAnswer) {
				p := a.Profile
				if p.Ctx != 8192 || p.Parallel != 2 || p.KVUnified || p.FlashAttn != plan.FlashOn || p.CacheK != "q8_0" || strings.Join(p.Pass, " ") != "--jinja -t 4" {
					t.Errorf("profile %+v, want -c 8192 -np 2 -fa on -ctk q8_0 and --jinja -t 4 passed through", p)
				}
			}},
		{"incompatible architecture", "model=hf:example/strange-GGUF&machine=rtx-4090", nil,
			func(t *testing.T, a fitAnswer) {
				if a.Verdict != plan.Incompatible || !strings.Contains(a.Reason, "strange") {
					t.Errorf("verdict %q reason %q, want incompatible with the reason", a.Verdict, a.Reason)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := do(t, h, "GET", "/api/fit?"+tt.query, "", nil)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			for _, key := range []string{"artifact", "profile", "verdict", "reason", "limiting", "domains", "buffers"} {
				if !bytes.Contains(body, []byte(`"`+key+`":`)) {
					t.Errorf("the answer has no %q, which headroom fit --json prints", key)
				}
			}
			got := decode[fitAnswer](t, body)
			if tt.profile != nil {
				// The same assessment the CLI makes for these flags.
				p := plan.Defaults()
				tt.profile(&p)
				want, err := plan.Assess(m, nil, p, snap)
				if err != nil {
					t.Fatal(err)
				}
				if got.Verdict != want.Verdict || got.Reason != want.Reason || !reflect.DeepEqual(got.Domains, want.Domains) {
					t.Errorf("got %s %q %+v\nwant %s %q %+v", got.Verdict, got.Reason, got.Domains, want.Verdict, want.Reason, want.Domains)
				}
				if got.Profile.Ctx != want.Resolved.NCtx {
					t.Errorf("profile ctx %d, want the context llama.cpp creates, %d", got.Profile.Ctx, want.Resolved.NCtx)
				}
				if got.Artifact.Variant != "qwen3-8b/Q4_K_M" || got.Artifact.Architecture != "qwen3" {
					t.Errorf("artifact %+v, want the catalog variant", got.Artifact)
				}
			}
			if tt.check != nil {
				tt.check(t, got)
			}
		})
	}
}

// TestFitExpertsInRAM: the plan for gpt-oss-120b on a 24 GB card keeps the
// routed experts of some layers in system memory; /api/fit with the plan's
// ncmoe fits, without it (every expert on the card) it does not. The panel
// passes the plan's ncmoe and ts to /api/fit for this reason.
func TestFitExpertsInRAM(t *testing.T) {
	h := newTestHandler(t, nil)
	var p struct {
		Chosen *struct {
			Profile plan.Profile `json:"profile"`
		} `json:"chosen"`
	}
	get := func(target string, v any) {
		t.Helper()
		code, _, body := do(t, h, "GET", target, "", nil)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", target, code, body)
		}
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatal(err)
		}
	}
	get("/api/plan?model=gpt-oss-120b/MXFP4_MOE&machine=rtx-4090&parallel=1", &p)
	if p.Chosen == nil || p.Chosen.Profile.CPUMoE == 0 {
		t.Fatalf("plan %+v: want experts of some layers in system memory", p.Chosen)
	}
	c := p.Chosen.Profile
	base := fmt.Sprintf("/api/fit?model=gpt-oss-120b/MXFP4_MOE&machine=rtx-4090&parallel=1&ctx=%d&ngl=all&ctk=%s&ctv=%s&fa=%s", c.Ctx, c.CacheK, c.CacheV, c.FlashAttn)
	var with, without fitAnswer
	get(base+fmt.Sprintf("&ncmoe=%d", c.CPUMoE), &with)
	get(base, &without)
	if with.Verdict != plan.Fits || without.Verdict != plan.DoesNotFit {
		t.Errorf("with ncmoe=%d: %s (%s); without: %s", c.CPUMoE, with.Verdict, with.Reason, without.Verdict)
	}
}

// TestPresets lists the machines the panel's picker offers: every preset
// hw knows, with its summary.
func TestPresets(t *testing.T) {
	status, _, body := do(t, newTestHandler(t, nil), "GET", "/api/presets", "", nil)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var got struct {
		Presets []hw.PresetInfo `json:"presets"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if want := hw.Presets(); len(got.Presets) != len(want) || len(want) == 0 || got.Presets[0] != want[0] {
		t.Errorf("presets %v, want hw's %v", got.Presets, want)
	}
}
