package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/engine/enginetest"
	"github.com/headroom-llm/headroom/plan"
)

// A model of an architecture headroom does not model is answered by the
// projection Config.Project opens: /api/fit gives a verdict from its
// buffers, /api/plan a plan that says its figures are llama.cpp's, and a
// model Project cannot answer for keeps its incompatible verdict with the
// reason Project gave.
func TestAPIProjected(t *testing.T) {
	bin, _ := enginetest.FitParams(t, "")
	unmodeled := &arch.Incompatible{Reason: `architecture "ernie4_5" is not one headroom models yet`}
	cleaned := 0
	h := newTestHandler(t, func(c *Config) {
		c.Open = func(ctx context.Context, ref string) (*arch.Model, error) { return nil, unmodeled }
		c.Project = func(ctx context.Context, ref string) (*engine.Projector, func(), error) {
			if ref == "hf:o/refused" {
				return nil, func() {}, &arch.Incompatible{Reason: "no llama.cpp was found to project it"}
			}
			b := arch.Basics{Arch: "ernie4_5", NLayer: 20, NVocab: 32000, CtxTrain: 32768}
			return &engine.Projector{Bin: bin, Model: "/nonexistent.gguf", Basics: b}, func() { cleaned++ }, nil
		}
	})

	status, _, body := do(t, h, "GET", "/api/fit?model=hf:o/r&machine=cpu-32&ctx=8192&parallel=1", "", nil)
	if status != http.StatusOK {
		t.Fatalf("fit: %d %s", status, body)
	}
	var f struct {
		Verdict  string
		Warnings []string
		Buffers  []plan.Buffer
	}
	if err := json.Unmarshal(body, &f); err != nil {
		t.Fatal(err)
	}
	if f.Verdict != plan.Fits || len(f.Buffers) == 0 || !strings.Contains(strings.Join(f.Warnings, " "), "llama.cpp's own projection") {
		t.Errorf("fit: %s, %d buffers, warnings %q", f.Verdict, len(f.Buffers), f.Warnings)
	}

	status, _, body = do(t, h, "GET", "/api/plan?model=hf:o/r&machine=cpu-32", "", nil)
	if status != http.StatusOK {
		t.Fatalf("plan: %d %s", status, body)
	}
	var p struct {
		Chosen    *plan.Candidate
		Projected string
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Chosen == nil || p.Projected == "" {
		t.Errorf("plan: %s", body)
	}
	if cleaned != 2 {
		t.Errorf("the projection's cleanup ran %d times for two requests", cleaned)
	}

	status, _, body = do(t, h, "GET", "/api/fit?model=hf:o/refused&machine=cpu-32", "", nil)
	if status != http.StatusOK || !strings.Contains(string(body), `"incompatible"`) || !strings.Contains(string(body), "no llama.cpp was found") {
		t.Errorf("fit of a model that cannot be projected: %d %s", status, body)
	}
}
