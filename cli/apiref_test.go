package cli

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/store"
)

// TestAPILoadRefusesBadReferences: /api/load with file:// answered 500,
// as if the server had failed. A reference of a scheme headroom does not
// read answers 400 with the reason, a URL or a path outside the store 403,
// a mistyped catalog entry 404; /api/fit answers the same for each.
func TestAPILoadRefusesBadReferences(t *testing.T) {
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := hw.LoadMachine("rtx-4090")
	srv := startAPI(t, st, snap, "", "", plan.DefaultSearch(), time.Second)
	for _, tc := range []struct {
		model string
		code  int
		want  string
	}{
		{"file:///etc/passwd", http.StatusBadRequest, `the scheme \"file\" is not supported`},
		{"gopher://example.com/x.gguf", http.StatusBadRequest, `the scheme \"gopher\" is not supported`},
		{"hf:", http.StatusBadRequest, "accepted forms"},
		{"https://example.com/x.gguf", http.StatusForbidden, "not URLs"},
		{"/etc/passwd", http.StatusForbidden, "only files inside headroom's store"},
		{"qwen3-8bb/Q4_K_M", http.StatusNotFound, "did you mean qwen3-8b/Q4_K_M"},
	} {
		code, body := postJSON(srv.URL+"/api/load", `{"model":`+quote(tc.model)+`}`)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("load %s: %d %s; want %d and %q", tc.model, code, body, tc.code, tc.want)
		}
		resp, err := http.Get(srv.URL + "/api/fit?model=" + url.QueryEscape(tc.model))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("fit %s: %d; want %d as load answers", tc.model, resp.StatusCode, tc.code)
		}
	}
}
