package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/gguf"
)

// blobServer serves files by path with range support and records the
// Range headers it sees. fault, when set, may answer request n (0-based)
// itself by returning true.
type blobServer struct {
	*httptest.Server
	files map[string][]byte
	fault func(w http.ResponseWriter, r *http.Request, n int, data []byte) bool

	mu     sync.Mutex
	ranges []string
	auth   []string
}

func newBlobServer(t *testing.T, files map[string][]byte) *blobServer {
	s := &blobServer{files: files}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		n := len(s.ranges)
		s.ranges = append(s.ranges, r.Header.Get("Range"))
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		fault := s.fault
		s.mu.Unlock()
		data, ok := s.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if fault != nil && fault(w, r, n, data) {
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *blobServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ranges)
}

func (s *blobServer) authSeen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.auth)
}

// plainClient is a Client whose Hub endpoint is elsewhere, with fast
// retries and no cache.
func plainClient(t *testing.T) *Client {
	c := NewClient(func(k string) string {
		return map[string]string{"HF_ENDPOINT": "https://hub.invalid", "HF_TOKEN": testToken}[k]
	})
	c.Backoff = time.Millisecond
	c.Timeout = 5 * time.Second
	t.Cleanup(c.HTTP.CloseIdleConnections)
	return c
}

func TestRangeRequestCounts(t *testing.T) {
	const window = 4 << 20
	tests := []struct {
		name         string
		tokens       int
		hole         uint64
		wantRanges   []string
		maxExtraRead int64 // bytes fetched beyond the header
	}{
		{"tiny file", 0, 0, []string{"bytes=0-4194303"}, 1 << 16},
		{"small header, 16 MiB file", 0, 4 << 20, []string{"bytes=0-4194303"}, 1 << 16},
		{"6 MiB header", 6 << 10, 1 << 20, []string{"bytes=0-4194303", "bytes=4194304-"}, 1 << 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := ggufFile(t, tt.tokens, tt.hole)
			want, err := gguf.Read(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			s := newBlobServer(t, map[string][]byte{"/m/model-Q4_K_M.gguf": data})
			c := plainClient(t)
			hd, err := c.Open(context.Background(), s.URL+"/m/model-Q4_K_M.gguf")
			if err != nil {
				t.Fatal(err)
			}
			if got := s.seen(); !slices.Equal(got, tt.wantRanges) {
				t.Errorf("Range headers %q, want %q", got, tt.wantRanges)
			}
			if hd.Stats.RangeRequests != len(tt.wantRanges) {
				t.Errorf("stats count %d range requests, want %d", hd.Stats.RangeRequests, len(tt.wantRanges))
			}
			f := hd.Model.Files[0]
			if f.DataOffset != want.DataOffset || f.Size != int64(len(data)) || len(f.Tensors) != len(want.Tensors) {
				t.Errorf("parsed data offset %d size %d, want %d and %d", f.DataOffset, f.Size, want.DataOffset, len(data))
			}
			if got := hd.Stats.BytesFetched; got < f.DataOffset-int64(f.Alignment) || got > f.DataOffset+tt.maxExtraRead {
				t.Errorf("fetched %d bytes for a %d-byte header", got, f.DataOffset)
			}
			if a := hd.Artifact; a.Kind != KindURL || len(a.Files) != 1 || a.Files[0].Size != int64(len(data)) || a.QuantTag != "Q4_K_M" {
				t.Errorf("artifact %+v", a)
			}
			if window < f.DataOffset && hd.Stats.BytesFetched < window {
				t.Errorf("fetched %d bytes, less than the first window", hd.Stats.BytesFetched)
			}
		})
	}
}

func TestRangeServerFaults(t *testing.T) {
	data := ggufFile(t, 0, 0)
	big := ggufFile(t, 6<<10, 0)
	other := ggufFile(t, 6<<10, 1<<10)
	tests := []struct {
		name      string
		data      []byte
		fault     func(w http.ResponseWriter, r *http.Request, n int, data []byte) bool
		wantErr   error    // nil: success
		wantMsg   []string // in the error
		wantCalls int
	}{
		{
			name: "ignores Range",
			data: data,
			fault: func(w http.ResponseWriter, r *http.Request, n int, data []byte) bool {
				w.Header().Set("Content-Length", fmt.Sprint(64<<20))
				w.Write(data)
				w.Write(make([]byte, 1<<20))
				return true
			},
			wantErr: ErrNoRangeSupport, wantMsg: []string{"does not support range requests", "200 OK", "67108864 bytes"}, wantCalls: 1,
		},
		{
			name: "206 without Content-Range",
			data: data,
			fault: func(w http.ResponseWriter, r *http.Request, n int, data []byte) bool {
				w.WriteHeader(http.StatusPartialContent)
				w.Write(data)
				return true
			},
			wantErr: ErrNoRangeSupport, wantMsg: []string{"does not support range requests", "found \"\""}, wantCalls: 1,
		},
		{
			name: "unknown total size",
			data: data,
			fault: func(w http.ResponseWriter, r *http.Request, n int, data []byte) bool {
				w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-%d/*", len(data)-1))
				w.WriteHeader(http.StatusPartialContent)
				w.Write(data)
				return true
			},
			wantErr: ErrNoRangeSupport, wantCalls: 1,
		},
		{
			name: "503 twice, then fine",
			data: data,
			fault: func(w http.ResponseWriter, r *http.Request, n int, data []byte) bool {
				if n < 2 {
					http.Error(w, "busy", http.StatusServiceUnavailable)
					return true
				}
				return false
			},
			wantCalls: 3,
		},
		{
			name: "429 with Retry-After, dropped connection, then fine",
			data: data,
			fault: func(w http.ResponseWriter, r *http.Request, n int, data []byte) bool {
				switch n {
				case 0:
					w.Header().Set("Retry-After", "0")
					http.Error(w, "slow down", http.StatusTooManyRequests)
				case 1:
					// A response cut off in its status line: the transport
					// cannot retry it by itself, so this is ours to retry.
					conn, rw, _ := http.NewResponseController(w).Hijack()
					rw.WriteString("HTTP/1.1 2")
					rw.Flush()
					conn.Close()
				default:
					return false
				}
				return true
			},
			wantCalls: 3,
		},
		{
			name: "503 forever",
			data: data,
			fault: func(w http.ResponseWriter, r *http.Request, n int, data []byte) bool {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return true
			},
			wantMsg: []string{"gave up after 3 attempts", "503 Service Unavailable"}, wantCalls: 3,
		},
		{
			name: "Retry-After too long",
			data: data,
			fault: func(w http.ResponseWriter, r *http.Request, n int, data []byte) bool {
				w.Header().Set("Retry-After", "3600")
				http.Error(w, "later", http.StatusTooManyRequests)
				return true
			},
			wantMsg: []string{"retry after 1h0m0s"}, wantCalls: 1,
		},
		{
			name: "file replaced between requests",
			data: big,
			fault: func(w http.ResponseWriter, r *http.Request, n int, data []byte) bool {
				if n == 0 {
					return false
				}
				http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(other))
				return true
			},
			wantErr: ErrFileChanged, wantMsg: []string{"size was", "now the server says"}, wantCalls: 2,
		},
		{
			name: "empty file",
			data: data,
			fault: func(w http.ResponseWriter, r *http.Request, n int, data []byte) bool {
				w.Header().Set("Content-Range", "bytes */0")
				w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
				return true
			},
			wantErr: gguf.ErrTruncated, wantCalls: 1,
		},
		{
			name: "404",
			data: data,
			fault: func(w http.ResponseWriter, r *http.Request, n int, data []byte) bool {
				http.NotFound(w, r)
				return true
			},
			wantMsg: []string{"404 Not Found", "check the URL"}, wantCalls: 1,
		},
		{
			name: "403 off the Hub",
			data: data,
			fault: func(w http.ResponseWriter, r *http.Request, n int, data []byte) bool {
				http.Error(w, "no", http.StatusForbidden)
				return true
			},
			wantMsg: []string{"403 Forbidden", "HF_TOKEN only to the Hugging Face endpoint"}, wantCalls: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newBlobServer(t, map[string][]byte{"/f.gguf": tt.data})
			s.fault = tt.fault
			c := plainClient(t)
			hd, err := c.Open(context.Background(), s.URL+"/f.gguf")
			calls := len(s.seen())
			if calls != tt.wantCalls {
				t.Errorf("server saw %d requests %q, want %d", calls, s.seen(), tt.wantCalls)
			}
			if tt.wantErr == nil && tt.wantMsg == nil {
				if err != nil {
					t.Fatal(err)
				}
				if hd.Stats.RangeRequests != tt.wantCalls {
					t.Errorf("stats count %d range requests, want %d", hd.Stats.RangeRequests, tt.wantCalls)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v, want %v", err, tt.wantErr)
			}
			for _, w := range tt.wantMsg {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), testToken) {
				t.Errorf("error contains the token")
			}
		})
	}
}

func TestResumedRangesContinueAtTheBreak(t *testing.T) {
	big := ggufFile(t, 6<<10, 0)
	s := newBlobServer(t, map[string][]byte{"/f.gguf": big})
	s.fault = func(w http.ResponseWriter, r *http.Request, n int, data []byte) bool {
		if n != 0 {
			return false
		}
		w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-4194303/%d", len(data)))
		w.Header().Set("Content-Length", "4194304")
		w.WriteHeader(http.StatusPartialContent)
		w.Write(data[:1<<20])
		return true
	}
	if _, err := plainClient(t).Open(context.Background(), s.URL+"/f.gguf"); err != nil {
		t.Fatal(err)
	}
	want := []string{"bytes=0-4194303", "bytes=1048576-4194303", "bytes=4194304-"}
	if got := s.seen(); !slices.Equal(got, want) {
		t.Errorf("Range headers %q, want %q", got, want)
	}
}

func TestTimeouts(t *testing.T) {
	data := ggufFile(t, 0, 0)
	tests := []struct {
		name  string
		fault func(w http.ResponseWriter, r *http.Request, n int, data []byte) bool
	}{
		{"no answer", func(w http.ResponseWriter, r *http.Request, n int, data []byte) bool {
			<-r.Context().Done()
			return true
		}},
		{"body stalls", func(w http.ResponseWriter, r *http.Request, n int, data []byte) bool {
			var start int
			fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-", &start)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(data)-1, len(data)))
			w.Header().Set("Content-Length", fmt.Sprint(len(data)-start))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[start : start+4])
			http.NewResponseController(w).Flush()
			<-r.Context().Done()
			return true
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newBlobServer(t, map[string][]byte{"/f.gguf": data})
			s.fault = tt.fault
			c := plainClient(t)
			c.Timeout = 50 * time.Millisecond
			c.Attempts = 2
			start := time.Now()
			_, err := c.Open(context.Background(), s.URL+"/f.gguf")
			if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "in every 50ms") {
				t.Errorf("error %v, want ErrTimeout", err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
			if n := len(s.seen()); n != 2 {
				t.Errorf("%d requests, want 2 attempts", n)
			}
		})
	}
}

func TestCancelStopsReading(t *testing.T) {
	data := ggufFile(t, 0, 0)
	s := newBlobServer(t, map[string][]byte{"/f.gguf": data})
	s.fault = func(w http.ResponseWriter, r *http.Request, n int, data []byte) bool {
		<-r.Context().Done()
		return true
	}
	c := plainClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Open(ctx, s.URL+"/f.gguf")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v, want the context's", err)
	}
	if d := time.Since(start); d > time.Second || len(s.seen()) != 1 {
		t.Errorf("took %v and %d requests; want a prompt stop without retries", d, len(s.seen()))
	}
}

func TestHeaderTooLarge(t *testing.T) {
	data := ggufFile(t, 2<<10, 0) // a 2 MiB header
	s := newBlobServer(t, map[string][]byte{"/f.gguf": data})
	c := plainClient(t)
	c.MaxHeader = 1 << 20
	_, err := c.Open(context.Background(), s.URL+"/f.gguf")
	if !errors.Is(err, ErrHeaderTooLarge) || !strings.Contains(err.Error(), "limit of 1048576 bytes") {
		t.Errorf("error %v, want ErrHeaderTooLarge", err)
	}
	if got := s.seen(); !slices.Equal(got, []string{"bytes=0-1048575"}) {
		t.Errorf("Range headers %q, want only the first window, capped at the limit", got)
	}
}

func TestTokenGoesOnlyToTheEndpoint(t *testing.T) {
	data := ggufFile(t, 0, 0)
	hub := newBlobServer(t, map[string][]byte{"/f.gguf": data})
	other := newBlobServer(t, map[string][]byte{"/f.gguf": data})
	c := plainClient(t)
	c.Endpoint = hub.URL
	for _, s := range []*blobServer{hub, other} {
		if _, err := c.Open(context.Background(), s.URL+"/f.gguf"); err != nil {
			t.Fatal(err)
		}
	}
	if got := hub.authSeen(); !slices.Equal(got, []string{"Bearer " + testToken}) {
		t.Errorf("the endpoint got Authorization %q", got)
	}
	if got := other.authSeen(); !slices.Equal(got, []string{""}) {
		t.Errorf("another server (same host, other port) got Authorization %q", got)
	}
}

func TestPlainURLSplitModel(t *testing.T) {
	files := map[string][]byte{}
	for i, s := range ggufShards(t, 3) {
		files["/models/"+gguf.ShardName("S-Q4_K_M", i+1, 3)] = s
	}
	s := newBlobServer(t, files)
	c := plainClient(t)
	c.CacheDir = t.TempDir()
	hd, err := c.Open(context.Background(), s.URL+"/models/S-Q4_K_M-00001-of-00003.gguf?download=1")
	if err != nil {
		t.Fatal(err)
	}
	if len(hd.Artifact.Files) != 3 || hd.Artifact.Files[2].Name != "S-Q4_K_M-00003-of-00003.gguf" ||
		!strings.HasSuffix(hd.Artifact.Files[2].URL, "/models/S-Q4_K_M-00003-of-00003.gguf?REDACTED") {
		t.Errorf("files %+v, want all 3 shards with masked queries", hd.Artifact.Files)
	}
	if len(hd.Model.Tensors) != 3 || hd.Stats.RangeRequests != 3 {
		t.Errorf("%d tensors, stats %+v", len(hd.Model.Tensors), hd.Stats)
	}
	if entries, _ := os.ReadDir(c.CacheDir); len(entries) != 0 {
		t.Errorf("a plain URL was cached: %v", entries)
	}
	delete(files, "/models/S-Q4_K_M-00002-of-00003.gguf")
	if _, err := c.Open(context.Background(), s.URL+"/models/S-Q4_K_M-00001-of-00003.gguf"); err == nil ||
		!strings.Contains(err.Error(), "S-Q4_K_M-00002-of-00003.gguf") {
		t.Errorf("missing shard: error %v, want it named", err)
	}
}

func TestRangeReaderDirect(t *testing.T) {
	data := ggufFile(t, 0, 1<<16)
	s := newBlobServer(t, map[string][]byte{"/f.gguf": data})
	c := plainClient(t)
	c.InitialRead = 1000
	r, err := c.OpenRange(context.Background(), s.URL+"/f.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Size() != int64(len(data)) || r.Requests() != 1 {
		t.Fatalf("size %d, %d requests", r.Size(), r.Requests())
	}
	tests := []struct {
		off, n int64
		err    bool
	}{{0, 10, false}, {990, 20, false}, {500, 100, false}, {5000, 3000, false}, {int64(len(data)) - 5, 10, true}, {int64(len(data)), 1, true}}
	for _, tt := range tests {
		p := make([]byte, tt.n)
		n, err := r.ReadAt(p, tt.off)
		want := data[tt.off:min(tt.off+tt.n, int64(len(data)))]
		if !bytes.Equal(p[:n], want) || (err != nil) != tt.err {
			t.Errorf("ReadAt(%d, %d) = %d, %v", tt.off, tt.n, n, err)
		}
	}
	if r.Requests() != 2 {
		t.Errorf("%d requests, want 2 (window, then one stream)", r.Requests())
	}
	if got := s.seen(); !slices.Equal(got, []string{"bytes=0-999", "bytes=1000-"}) {
		t.Errorf("Range headers %q", got)
	}
}
