package cli

import (
	"context"
	"github.com/headroom-llm/headroom/report"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/jsondoc"
	"github.com/headroom-llm/headroom/server"
)

// TestJSONDoc holds docs/json.md to what headroom prints: the Go types of
// fit, plan and recommend --json have exactly the fields its tables list,
// of the types they say; and the JSON the commands and the API print has
// no field the page does not list, nor a value of another type. Every
// section of the page must be reached. (The API's own types are read by
// server's TestJSONDoc.)
func TestJSONDoc(t *testing.T) {
	c := jsondoc.New(t, "../docs/json.md")
	for section, ty := range map[string]reflect.Type{
		"fit":       reflect.TypeFor[report.Fit](),
		"plan":      reflect.TypeFor[report.Plan](),
		"recommend": reflect.TypeFor[recommendReport](),
		// What /api/instances lists; the empty lists below reach no row.
		"instance": reflect.TypeFor[server.Instance](),
		"event":    reflect.TypeFor[server.Event](),
	} {
		c.Type(section, ty, section)
	}

	// What the commands print, on a machine with a GPU: a fit that fits,
	// one that does not (with its fixes), a plan, one where nothing fits
	// (printed, then exit status 1), and the whole catalog.
	for _, args := range [][]string{
		{"fit", "qwen3-8b/Q4_K_M", "--machine", "rtx-4090", "-c", "8192", "-np", "1"},
		{"fit", "qwen3-32b/Q4_K_M", "--machine", "rtx-4090", "-ngl", "all", "-c", "32768", "-np", "1"},
		{"plan", "qwen3-8b/Q4_K_M", "--machine", "rtx-4090"},
		{"plan", "qwen3-235b-a22b/Q8_0", "--machine", "rtx-4090"},
		{"recommend", "--machine", "rtx-4090"},
	} {
		if args[0] != "recommend" {
			args = append(args, "--quiet")
		}
		_, out, errs := run(t, append(args, "--json")...)
		c.JSON(args[0], []byte(out), strings.Join(args, " ")+": "+errs)
	}

	// What the API answers, on the same machine.
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	lock, err := catalog.LoadLock()
	if err != nil {
		t.Fatal(err)
	}
	h, err := server.New(server.Config{Catalog: cat, Lock: lock,
		Machine: func(context.Context) (*hw.Snapshot, error) { return hw.LoadMachine("rtx-4090") }})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct{ section, target string }{
		{"api-fit", "/api/fit?model=qwen3-8b/Q4_K_M&ctx=8192&parallel=1"},
		{"api-fit", "/api/fit?model=qwen3-32b/Q4_K_M&ctx=32768&parallel=1"},
		{"api-plan", "/api/plan?model=qwen3-8b/Q4_K_M"},
		{"api-plan", "/api/plan?model=qwen3-235b-a22b/Q8_0"},
		{"api-recommend", "/api/recommend"},
		{"models", "/v1/models"},
		{"error", "/api/fit"},
		{"instances", "/api/instances"},
	} {
		req := httptest.NewRequest("GET", q.target, nil)
		req.Host = "127.0.0.1:8787"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		c.JSON(q.section, rec.Body.Bytes(), q.target)
	}

	for _, s := range c.Unreached() {
		t.Errorf("docs/json.md's section %s is reached by no type and no output: remove it or link it", s)
	}
}
