package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestProviderStalledClient: a client that opens a stream and never reads
// it holds its model in flight only until its writes stall; a load that
// must evict that model goes ahead within the drain bound, and closing
// the pool (serve-api's SIGTERM) returns within seconds, the stalled
// connection notwithstanding.
func TestProviderStalledClient(t *testing.T) {
	l := newFakeLoader(t, 150*mib, map[string]int64{"a": 100 * mib, "b": 100 * mib})
	// a's server streams without end, in chunks large enough to fill
	// the connection's buffers; b answers at once.
	endless := http.NewServeMux()
	endless.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(bodyText(r.Body), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"object":"chat.completion","choices":[{"message":{"role":"assistant","content":"hello"}}]}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := "data: " + strings.Repeat("x", 32<<10) + "\n\n"
		for r.Context().Err() == nil {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	l.handlerOverride = endless
	pool := NewPool(PoolConfig{Loader: l, Accept: func(string) error { return nil }, Drain: 500 * time.Millisecond})
	h := newTestHandler(t, func(c *Config) { c.Pool, c.WriteStall = pool, 500*time.Millisecond })
	srv := httptest.NewServer(h)
	defer srv.Close()

	// The stalled client: sends its request and never reads a byte.
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"model":"a","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", srv.Listener.Addr(), len(body), body)
	deadline := time.Now().Add(5 * time.Second)
	for states(pool)["a"] != StateLoaded {
		if time.Now().After(deadline) {
			t.Fatalf("a never loaded: %v", states(pool))
		}
		time.Sleep(10 * time.Millisecond)
	}

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"b","stream":false,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("b, with a's client stalled: %v after %v", err, time.Since(start))
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("b: %d", resp.StatusCode)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("b loaded %v after asking, with a's client stalled; want within the drain bound", d)
	}

	// A second stalled stream, on b, then the pool closes.
	conn2, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	body = `{"model":"b","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	fmt.Fprintf(conn2, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", srv.Listener.Addr(), len(body), body)
	time.Sleep(200 * time.Millisecond)
	start = time.Now()
	closeCtx, cancelClose := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelClose()
	pool.Close(closeCtx)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("closing the pool took %v with a stalled client", d)
	}
	l.mu.Lock()
	left := len(l.live)
	l.mu.Unlock()
	if left != 0 {
		t.Errorf("%d servers left after close", left)
	}
}

func bodyText(r io.Reader) string {
	b, _ := io.ReadAll(r)
	return string(b)
}
