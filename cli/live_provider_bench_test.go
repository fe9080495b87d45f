package cli

import (
	"bufio"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/synth"
)

// BenchmarkLiveProvider measures the provider against the real
// llama-server (skipped without HEADROOM_LLAMA_SERVER), with the child's
// own address as the baseline, asked alternately so that both see the
// same machine: the time to the first streamed byte, tokens a second of a
// streamed answer (one chunk a token), and how long a request for a
// model not loaded takes to its first byte (the load, its readiness
// completion and the answer).
//
// HEADROOM_BENCH_THREADS=N runs each child with --threads N: on a machine
// with as many cores as llama-server takes by default, its threads keep
// every core busy while it answers, and each hop of the proxy waits for
// one, which measures the machine's scheduling rather than the proxy.
func BenchmarkLiveProvider(b *testing.B) {
	bin := liveEngine(b)
	var f *providerFixture
	if n := os.Getenv("HEADROOM_BENCH_THREADS"); n != "" {
		opts := providerOpts()
		opts.Base.Pass = append(opts.Base.Pass, "--threads", n)
		fitParams, _ := engine.FindFitParams(bin, nil)
		f = startProviderOn(b, bin, fitParams, twoLoadMachine(b, "tinyllama-1.1b", synth.Q4_K_M, opts), opts, liveProviderDir(b), nil)
	} else {
		f = startProvider(b, bin, nil)
	}
	start := time.Now()
	f.streamChat(b, "a")
	load := time.Since(start)
	direct := f.pool.Models()[0].Child.URL()
	// stream returns the time to the first byte and the chunks a second.
	stream := func(base string, tokens int) (time.Duration, float64) {
		start := time.Now()
		resp, err := liveChat(context.Background(), base, "a", true, tokens)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		if _, err := br.Peek(1); err != nil {
			b.Fatal(err)
		}
		first := time.Since(start)
		chunks, done, err := sseChunks(br)
		if err != nil || !done {
			b.Fatalf("stream from %s: %d chunks, done %v, %v", base, len(chunks), done, err)
		}
		return first, float64(len(chunks)) / time.Since(start).Seconds()
	}
	var ttfbDirect, ttfbProxy time.Duration
	var rateDirect, rateProxy float64
	// Each pair is asked in turn, the first of it changing from one
	// iteration to the next, so that neither side always follows the
	// other's answer.
	both := func(i, tokens int) (direct1, proxy time.Duration, rd, rp float64) {
		if i%2 == 0 {
			direct1, rd = stream(direct, tokens)
			proxy, rp = stream(f.srv.URL, tokens)
		} else {
			proxy, rp = stream(f.srv.URL, tokens)
			direct1, rd = stream(direct, tokens)
		}
		return direct1, proxy, rd, rp
	}
	i := 0
	for b.Loop() {
		d, p, _, _ := both(i, 1)
		ttfbDirect, ttfbProxy = ttfbDirect+d, ttfbProxy+p
		_, _, rd, rp := both(i, 64)
		rateDirect, rateProxy = rateDirect+rd, rateProxy+rp
		i++
	}
	n := float64(b.N)
	b.ReportMetric(float64(ttfbDirect.Microseconds())/n/1000, "direct-ttfb-ms")
	b.ReportMetric(float64(ttfbProxy.Microseconds())/n/1000, "headroom-ttfb-ms")
	b.ReportMetric(float64((ttfbProxy-ttfbDirect).Microseconds())/n/1000, "added-ttfb-ms")
	b.ReportMetric(rateDirect/n, "direct-tok/s")
	b.ReportMetric(rateProxy/n, "headroom-tok/s")
	b.ReportMetric(100*rateProxy/rateDirect, "%-of-direct")
	b.ReportMetric(load.Seconds(), "load-on-demand-s")
	if !strings.Contains(f.log.String(), "load a:") {
		b.Errorf("no load line:\n%s", f.log.String())
	}
}
