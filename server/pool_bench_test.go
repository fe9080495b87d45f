package server

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// BenchmarkProxyFirstByte is what forwarding through the provider adds
// to the time to the first streamed byte, against a stand-in child that
// answers at once: each iteration asks the child directly and through
// the provider, alternately, so both see the same machine.
func BenchmarkProxyFirstByte(b *testing.B) {
	l := newFakeLoader(b, 250*mib, map[string]int64{"a": 100 * mib})
	srv, pool := providerServer(b, l, PoolConfig{})
	if resp, err := chat(srv.URL, "a", true); err != nil {
		b.Fatal(err)
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	direct := pool.Models()[0].Child.URL()
	first := func(base string) time.Duration {
		start := time.Now()
		resp, err := chat(base, "a", true)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		if _, err := br.ReadByte(); err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		io.Copy(io.Discard, br)
		return d
	}
	var viaDirect, viaProxy time.Duration
	for b.Loop() {
		viaDirect += first(direct)
		viaProxy += first(srv.URL)
	}
	n := float64(b.N)
	b.ReportMetric(float64(viaDirect.Microseconds())/n, "direct-µs")
	b.ReportMetric(float64(viaProxy.Microseconds())/n, "headroom-µs")
	b.ReportMetric(float64((viaProxy-viaDirect).Microseconds())/n, "added-µs")
}

// BenchmarkProxyStream is a stream of 2000 events of one token each
// read to its end directly and through the provider: the ratio of the
// rates is what the provider leaves of the child's throughput.
func BenchmarkProxyStream(b *testing.B) {
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		ev := `data: {"object":"chat.completion.chunk","choices":[{"delta":{"content":"tok"}}]}` + "\n\n"
		for range 2000 {
			io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	l := newFakeLoader(b, 250*mib, map[string]int64{"a": 100 * mib})
	l.handlerOverride = upstream
	srv, pool := providerServer(b, l, PoolConfig{})
	read := func(base string) time.Duration {
		start := time.Now()
		resp, err := chat(base, "a", true)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil || !strings.HasSuffix(string(data), "[DONE]\n\n") {
			b.Fatalf("stream cut: %v", err)
		}
		return time.Since(start)
	}
	read(srv.URL) // loads a
	direct := pool.Models()[0].Child.URL()
	var viaDirect, viaProxy time.Duration
	for b.Loop() {
		viaDirect += read(direct)
		viaProxy += read(srv.URL)
	}
	events := 2000 * float64(b.N)
	b.ReportMetric(events/viaDirect.Seconds(), "direct-events/s")
	b.ReportMetric(events/viaProxy.Seconds(), "headroom-events/s")
	b.ReportMetric(100*viaDirect.Seconds()/viaProxy.Seconds(), "%-of-direct")
}
