package source

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/gguf"
)

// FuzzRemoteRead serves arbitrary bytes over HTTP and reads their header
// with range requests, in windows small enough that the open-ended stream
// and its buffer growth are exercised. It must never panic, and a header
// it accepts must be the one a local read accepts.
func FuzzRemoteRead(f *testing.F) {
	good := ggufFile(f, 8, 0)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte("GGUF"))
	var mu sync.Mutex
	var current []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		data := current
		mu.Unlock()
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	f.Cleanup(srv.Close)
	c := NewClient(func(string) string { return "" })
	c.Endpoint, c.CacheDir = "https://hub.invalid", ""
	c.InitialRead, c.MaxParse, c.MaxHeader, c.Attempts = 512, 16<<20, 8<<20, 1
	f.Fuzz(func(t *testing.T, data []byte) {
		mu.Lock()
		current = data
		mu.Unlock()
		h, err := c.Open(context.Background(), srv.URL+"/f.gguf")
		local, lerr := gguf.ReadWith(bytes.NewReader(data), int64(len(data)), gguf.Options{MaxAlloc: 16 << 20})
		if err != nil {
			return
		}
		if lerr != nil {
			t.Fatalf("accepted over HTTP, refused locally: %v", lerr)
		}
		remote := h.Model.Files[0]
		if remote.DataOffset != local.DataOffset || len(remote.Tensors) != len(local.Tensors) || len(remote.Metadata) != len(local.Metadata) {
			t.Fatalf("over HTTP: data at %d, %d tensors, %d keys; locally %d, %d, %d", remote.DataOffset, len(remote.Tensors), len(remote.Metadata),
				local.DataOffset, len(local.Tensors), len(local.Metadata))
		}
	})
}
