package source

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/internal/ggufattack"
)

// TestRemoteAttacksStayInBudget serves each header that broke the bound
// from a hostile server (over HTTP the nested arrays took 1.09 GB) and
// checks that reading and parsing it allocates no more than the 256 MiB
// bound: the range reader's buffers and the parser's values together.
func TestRemoteAttacksStayInBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates up to 256 MiB per case")
	}
	files := ggufattack.All()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g, ok := files[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, r, "", time.Time{}, io.NewSectionReader(g, 0, g.Size))
	}))
	t.Cleanup(srv.Close)
	// The hostile server's copies of what it sends are allocations of
	// this process too (about 2 MiB here, 6 MiB under the race detector,
	// which drops pooled buffers); none of it is the reader's.
	const slack = 8 << 20
	for name := range files {
		t.Run(name, func(t *testing.T) {
			c := plainClient(t)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			h, err := c.Open(context.Background(), srv.URL+"/"+strings.ReplaceAll(name, " ", "%20"))
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(h)
			n := after.TotalAlloc - before.TotalAlloc
			t.Logf("%s over HTTP: allocated %d MiB (%d bytes): %v", name, n>>20, n, err)
			if n > gguf.DefaultMaxAlloc+slack {
				t.Errorf("reading the header allocated %d bytes, over the %d-byte bound", n, gguf.DefaultMaxAlloc)
			}
			if err != nil && !errors.Is(err, gguf.ErrLimit) && !errors.Is(err, ErrHeaderTooLarge) {
				t.Errorf("error %v; want the bound's ErrLimit or ErrHeaderTooLarge", err)
			}
		})
	}
}
