package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/synth"
)

// TestInspectRemote70B reads a Llama-3.1-70B header (7 MiB, longer than the
// first 4 MiB read) from a plain HTTPS-style server and checks that it took
// at most two range requests and fetched little more than the header.
func TestInspectRemote70B(t *testing.T) {
	s, _ := synth.Lookup("llama-3.1-70b")
	b, err := synth.Build(s, synth.Q4_K_M)
	if err != nil {
		t.Fatal(err)
	}
	file, size, err := b.ReaderAt()
	if err != nil {
		t.Fatal(err)
	}
	var ranges atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Range") != "" {
			ranges.Add(1)
		}
		http.ServeContent(w, r, "l70.gguf", time.Time{}, io.NewSectionReader(file, 0, size))
	}))
	defer srv.Close()

	code, out, errs := run(t, "inspect", "--json", srv.URL+"/models/l70.gguf")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r struct {
		Parameters  uint64 `json:"parameters"`
		SizeBytes   int64  `json:"size_bytes"`
		HeaderBytes int64  `json:"header_bytes"`
		Fetch       struct {
			RangeRequests int   `json:"range_requests"`
			BytesFetched  int64 `json:"bytes_fetched"`
		} `json:"fetch"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Parameters != 70553706560 || r.SizeBytes != size {
		t.Errorf("parameters %d, size %d", r.Parameters, r.SizeBytes)
	}
	if got := ranges.Load(); got > 2 || r.Fetch.RangeRequests != int(got) {
		t.Errorf("server saw %d range requests, report says %d; want at most 2", got, r.Fetch.RangeRequests)
	}
	// Streaming may read ahead of the parser a little, but never the weights.
	if r.Fetch.BytesFetched < r.HeaderBytes || r.Fetch.BytesFetched > r.HeaderBytes+8<<20 {
		t.Errorf("fetched %d bytes for a %d-byte header", r.Fetch.BytesFetched, r.HeaderBytes)
	}
	t.Logf("%d range requests, %d bytes fetched for a %d-byte header", ranges.Load(), r.Fetch.BytesFetched, r.HeaderBytes)
}
