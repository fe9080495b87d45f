package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// testLimits are DefaultLimits scaled down so a test sees them act.
var testLimits = Limits{ReadHeader: 400 * time.Millisecond, Read: 700 * time.Millisecond, Idle: 300 * time.Millisecond, MaxHeaderBytes: 8 << 10}

// connCount is how many connections each attack opens: 1000 as in the
// issue with HEADROOM_CONN_ATTACK=1000, fewer by default to spare a small
// CI machine's file descriptors.
func connCount(t *testing.T) int {
	if n, err := strconv.Atoi(os.Getenv("HEADROOM_CONN_ATTACK")); err == nil && n > 0 {
		return n
	}
	return 200
}

// serveLimited serves h under l on a loopback port, until the test ends.
func serveLimited(t *testing.T, h http.Handler, l Limits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewHTTPServer(context.Background(), h, l, io.Discard)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// readAll reads what the body handler is sent, then answers.
func readAll(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		return
	}
	fmt.Fprintf(w, "%d bytes\n", n)
}

// closedWithin opens n connections, does what each is told to, and
// reports how long the slowest took, from its first byte sent, to be
// closed by the server (a read or write failing), failing if any
// outlives bound.
func closedWithin(t *testing.T, addr string, n int, bound time.Duration, do func(net.Conn) error) time.Duration {
	t.Helper()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		slowest time.Duration
		open    int
	)
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			start := time.Now()
			c.SetDeadline(time.Now().Add(bound + 5*time.Second))
			err := do(c)
			if err == nil {
				_, err = io.Copy(io.Discard, c)
			}
			// else the server closed it while the client still sent.
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				open++
			}
			slowest = max(slowest, took)
		}()
	}
	wg.Wait()
	if open > 0 || slowest > bound {
		t.Errorf("%d of %d connections still open after %v; the slowest closed after %v, want within %v", open, n, bound+5*time.Second, slowest, bound)
	}
	return slowest
}

// TestSlowBodyIsCut: a request whose body trickles in a byte at a time
// held its connection for as long as the client liked. It is closed now
// once Limits.Read has passed since the request began.
func TestSlowBodyIsCut(t *testing.T) {
	addr := serveLimited(t, http.HandlerFunc(readAll), testLimits)
	n := connCount(t)
	took := closedWithin(t, addr, n, testLimits.Read+time.Second, func(c net.Conn) error {
		if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"); err != nil {
			return err
		}
		for range 20 {
			time.Sleep(100 * time.Millisecond)
			if _, err := c.Write([]byte(" ")); err != nil {
				return err
			}
		}
		return nil
	})
	t.Logf("%d slow-body connections closed within %v (Limits.Read %v)", n, took.Round(time.Millisecond), testLimits.Read)
}

// TestIdleKeepAliveIsCut: a keep-alive connection left idle after an
// answer is closed once Limits.Idle has passed.
func TestIdleKeepAliveIsCut(t *testing.T) {
	addr := serveLimited(t, http.HandlerFunc(readAll), testLimits)
	n := connCount(t)
	took := closedWithin(t, addr, n, testLimits.Idle+time.Second, func(c net.Conn) error {
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Close {
			t.Error("the server asked to close after one answer; the test wants a keep-alive connection")
		}
		return nil
	})
	t.Logf("%d idle keep-alive connections closed within %v (Limits.Idle %v)", n, took.Round(time.Millisecond), testLimits.Idle)
}

// TestSlowHeadersAreCut: headers sent a line at a time are cut off at
// Limits.ReadHeader; headers over MaxHeaderBytes are refused.
func TestSlowHeadersAreCut(t *testing.T) {
	addr := serveLimited(t, http.HandlerFunc(readAll), testLimits)
	closedWithin(t, addr, 20, testLimits.ReadHeader+time.Second, func(c net.Conn) error {
		io.WriteString(c, "GET / HTTP/1.1\r\n")
		for range 20 {
			time.Sleep(100 * time.Millisecond)
			if _, err := io.WriteString(c, "X-Slow: 1\r\n"); err != nil {
				return err
			}
		}
		return nil
	})
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 64<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("64 KiB of headers: %d, want 431", resp.StatusCode)
	}
}

// TestStreamOutlivesReadTimeout: an answer that streams for well past
// Limits.Read after reading its body, sent with a length or chunked, is
// neither cut nor cancelled: net/http lifts the read deadline once the
// body is done, and there is no write timeout.
func TestStreamOutlivesReadTimeout(t *testing.T) {
	cancelled := make(chan bool, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			t.Errorf("reading the body: %v", err)
			return
		}
		rc := http.NewResponseController(w)
		for i := range 10 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			rc.Flush()
			time.Sleep(testLimits.Read / 3)
		}
		cancelled <- r.Context().Err() != nil
	})
	addr := serveLimited(t, h, testLimits)
	for _, chunked := range []bool{false, true} {
		var body io.Reader = strings.NewReader(`{"stream":true}`)
		if chunked {
			body = io.MultiReader(body) // no length: sent chunked
		}
		resp, err := http.Post("http://"+addr+"/", "application/json", body)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || strings.Count(string(b), "data: ") != 10 {
			t.Errorf("chunked %v: got %q, %v; want 10 events", chunked, b, err)
		}
		if <-cancelled {
			t.Errorf("chunked %v: the handler's context was cancelled while it streamed", chunked)
		}
	}
}
