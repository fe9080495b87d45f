package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/launch"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/server"
	"github.com/headroom-llm/headroom/source"
	"github.com/headroom-llm/headroom/store"
	"github.com/headroom-llm/headroom/synth"
)

// storedShape writes a sparse synthetic GGUF where the API accepts files:
// under the store's models/.
func storedShape(t *testing.T, st *store.Store, shape string, q synth.Quant) string {
	t.Helper()
	local := filepath.Join(st.Root, "models", "local")
	if err := os.MkdirAll(local, 0o755); err != nil {
		t.Fatal(err)
	}
	return writeShape(t, local, shape, q)
}

// startAPI serves serve-api's runtime over the store on a fixed machine,
// loading with bin under opts and checking plans with fitParams (none when
// ""); the runtime stops every server it started when the test ends.
func startAPI(t *testing.T, st *store.Store, snap *hw.Snapshot, bin, fitParams string, opts plan.SearchOptions, ready time.Duration) *httptest.Server {
	t.Helper()
	cat, _ := catalog.Load()
	d := &launch.Deps{Client: source.NewClient(func(string) string { return "" }), Catalog: cat,
		Machine: func(context.Context) (*hw.Snapshot, error) { return snap, nil }, Cache: &admission.Cache{}, FitParams: fitParams}
	ctx, cancel := context.WithCancel(context.Background())
	rt := &apiRuntime{base: ctx, d: d, st: st, bin: bin, opts: opts, ready: ready, ledger: sharedLedger(st)}
	h, err := server.New(server.Config{Machine: d.Machine, Catalog: cat, Open: rt.open, Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		rt.stopAll(context.Background())
		cancel()
	})
	return srv
}

// postJSON posts body as application/json and returns the status and the
// answer (or the error's text with status 0).
func postJSON(url, body string) (int, string) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
