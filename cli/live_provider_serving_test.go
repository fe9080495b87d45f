package cli

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/engine/workload"
	"github.com/headroom-llm/headroom/synth"
)

// TestLiveProviderServingWithinLedger is serve-api with two children of
// the real llama-server under a workload that fills their prompt caches
// (distinct chats, both models at once): the children's resident memory,
// sampled all along, never passes what the ledger booked for them. The
// model is a Q8_0 file, which the CPU uses in place: its resident set
// holds no page cache of repacked weights that the booking rightly
// leaves out (docs/residency.md).
func TestLiveProviderServingWithinLedger(t *testing.T) {
	bin := liveEngine(t)
	dir := t.TempDir()
	src := writeShape(t, t.TempDir(), "tinyllama-1.1b", synth.Q8_0)
	for _, n := range []string{"a", "b"} {
		if err := os.Link(src, filepath.Join(dir, n+".gguf")); err != nil {
			t.Fatal(err)
		}
	}
	opts := providerOpts()
	fitParams, _ := engine.FindFitParams(bin, nil)
	f := startProviderOn(t, bin, fitParams, twoLoadMachine(t, "tinyllama-1.1b", synth.Q8_0, opts), opts, dir, nil)
	f.streamChat(t, "a")
	f.streamChat(t, "b")
	bs, err := f.ledger.Held()
	if err != nil || len(bs) != 2 {
		t.Fatalf("bookings %+v %v, want two", bs, err)
	}
	var booked int64
	var pids []int
	for _, b := range bs {
		booked += b.Need["ram"]
		pids = append(pids, b.ChildPID)
	}
	// Sample the children's resident memory together.
	var mu sync.Mutex
	var peak, peakAnon int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			var rss, anon int64
			for _, pid := range pids {
				r, a, err := workload.ReadRSS(pid)
				if err == nil {
					rss, anon = rss+r, anon+a
				}
			}
			mu.Lock()
			peak, peakAnon = max(peak, rss), max(peakAnon, anon)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	// Chats of about 650 tokens (100 words of bytes) (tinyllama's vocabulary holds every
	// byte), each new: each model's prompt cache takes its slot's last
	// state on every request.
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 5 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, model := range []string{"a", "b"} {
			content := randomText(rng, 100)
			wg.Go(func() { errs[i] = chatOnce(f.srv.URL, model, content) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	close(stop)
	<-done
	t.Logf("two children: peak resident %.1f MiB (%.1f anonymous); the ledger booked %.1f MiB of RAM for them",
		float64(peak)/(1<<20), float64(peakAnon)/(1<<20), float64(booked)/(1<<20))
	if peak > booked {
		t.Errorf("the children held %.1f MiB, more than the %.1f MiB booked", float64(peak)/(1<<20), float64(booked)/(1<<20))
	}
	if peakAnon < 64<<20 {
		t.Errorf("peak anonymous memory %.1f MiB: the workload did not run", float64(peakAnon)/(1<<20))
	}
}

// randomText is n words of lowercase letters.
func randomText(rng *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		for range 3 + rng.IntN(4) {
			b.WriteByte(byte('a' + rng.IntN(26)))
		}
		b.WriteByte(' ')
	}
	return b.String()
}

// chatOnce asks the provider for one token after a user message.
func chatOnce(base, model, content string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	body := fmt.Sprintf(`{"model":%q,"max_tokens":1,"messages":[{"role":"user","content":%q}]}`, model, content)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("chat with %s: %d %s", model, resp.StatusCode, b)
	}
	return nil
}
