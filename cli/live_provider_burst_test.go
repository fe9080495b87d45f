package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/engine/workload"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/server"
	"github.com/headroom-llm/headroom/synth"
)

// TestLiveProviderBurst is the provider under load with the real
// llama-server: three models, each with settings of its own from a
// presets file, on a machine whose memory holds two. A streamed request
// that waits for a load hears its progress before its first token; then
// OpenAI's JavaScript client sends 200 streamed chats at once over the
// three. None may be lost or cut; every load and eviction goes by the
// ledger; sampled every 50 ms, the bookings never pass the machine's
// memory, no more than two children run, and their resident memory stays
// within what was booked; each child's command line has its model's
// settings.
func TestLiveProviderBurst(t *testing.T) {
	bin := liveEngine(t)
	openAIClient(t)
	// Q8_0 files, which the CPU uses in place: a child's resident set
	// then holds no repacked copy of its weights, which its booking
	// rightly leaves out (docs/residency.md), and can be held to it.
	dir := t.TempDir()
	src := writeShape(t, t.TempDir(), "qwen2.5-0.5b", synth.Q8_0)
	for _, n := range []string{"a", "b", "c"} {
		if err := os.Link(src, filepath.Join(dir, n+".gguf")); err != nil {
			t.Fatal(err)
		}
	}
	presets := filepath.Join(t.TempDir(), "models.ini")
	if err := os.WriteFile(presets, []byte("[a]\ntemp = 0.3\n\n[b]\nc = 1024\n\n[c]\nthreads = 1\nalias = third\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := providerOpts()
	fitParams, _ := engine.FindFitParams(bin, nil)
	snap := twoLoadMachine(t, "qwen2.5-0.5b", synth.Q8_0, opts)
	f := startProviderSet(t, bin, fitParams, func(*admission.Ledger) *hw.Snapshot { return snap }, opts, dir, nil, presets,
		server.PoolConfig{Queue: 256, Drain: 10 * time.Minute})
	ramCap := snap.Domains[0].Capacity

	s := sampleProvider(t, f, ramCap)
	// A streamed request that waits for a's load hears where it stands.
	progress, first := progressBeforeFirstToken(t, f.srv.URL, "a")
	if len(progress) == 0 || !strings.HasPrefix(first, "data: ") {
		t.Errorf("before the first token: %d progress comments, then %q", len(progress), first)
	}
	steps := runClient(t, f.srv.URL+"/v1", "burst:200:a,b,c", "stream:third", "chat:gpt-4")
	s.stop()
	if st := steps[2]; st.Status != 404 || !strings.Contains(st.Error, "model_not_found") && !strings.Contains(st.Error, "no model of that name") {
		t.Errorf("an unknown model through OpenAI's client: %+v", st)
	}
	// The settings show in /api/instances, as the flags each runs with.
	var inst struct{ Instances []server.Instance }
	getJSONInto(t, f.srv.URL+"/api/instances", &inst)
	for _, in := range inst.Instances {
		if in.Model == "b" && (strings.Join(in.Settings, " ") != "--ctx-size 1024" || !strings.HasSuffix(in.Source, "models.ini:4")) {
			t.Errorf("b in /api/instances: settings %q from %q", in.Settings, in.Source)
		}
	}

	if b := steps[0]; b.WholeCount != 200 || len(b.Failures) != 0 {
		t.Errorf("burst: %d of %d whole; failures: %q", b.WholeCount, b.Requests, b.Failures)
	}
	if st := steps[1]; st.Status != 200 || !st.Whole || st.Named != "c" {
		t.Errorf("the alias third: %+v", st)
	}
	t.Logf("200 streams in %.1f s; %s", float64(steps[0].MS)/1000, s.says())
	s.check(t)
	for model, want := range map[string]string{"a": "--temp 0.3", "b": "-c 1024", "c": "--threads 1"} {
		if line := s.cmdline(model); !strings.Contains(line, want) {
			t.Errorf("%s's llama-server ran %q, without its setting %q", model, line, want)
		}
	}
	log := f.log.String()
	kinds := map[string]int{}
	for _, line := range strings.Split(log, "\n") {
		kind, _, _ := strings.Cut(line, " ")
		kinds[kind]++
	}
	t.Logf("%d loads, %d evictions by the ledger", kinds["load"], kinds["eviction"])
	if kinds["eviction"] == 0 || kinds["load"] < 3 {
		t.Errorf("want three loads at least and an eviction by the ledger:\n%s", log)
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.HasPrefix(line, "eviction ") && !strings.Contains(line, "short by") {
			t.Errorf("an eviction not made for a short domain: %s", line)
		}
		if strings.HasPrefix(line, "refusal ") || strings.HasPrefix(line, "failure ") {
			t.Errorf("%s", line)
		}
	}
}

// progressBeforeFirstToken streams a chat for model, not loaded, and
// returns the progress comments that came before the first data line,
// and that line.
func progressBeforeFirstToken(t *testing.T, base, model string) ([]string, string) {
	t.Helper()
	resp, err := liveChat(context.Background(), base, model, true, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("stream on %s: %d", model, resp.StatusCode)
	}
	var progress []string
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before a token: %v", err)
		}
		if c, ok := strings.CutPrefix(line, ": headroom-progress "); ok {
			var p struct{ Step string }
			if json.Unmarshal([]byte(c), &p) != nil || p.Step == "" {
				t.Errorf("progress comment %q", line)
			}
			progress = append(progress, strings.TrimSpace(c))
			continue
		}
		if strings.HasPrefix(line, "data: ") {
			t.Logf("%d progress comments before the first token; the last: %s", len(progress), progress[len(progress)-1])
			sseChunks(br) // the rest, to its end
			return progress, line
		}
	}
}

// providerSampler samples the provider every 50 ms: the ledger's
// bookings, the children that run and their resident memory, and each
// child's command line.
type providerSampler struct {
	f      *providerFixture
	ramCap int64
	done   chan struct{}
	wg     sync.WaitGroup

	mu                          sync.Mutex
	samples, mostChildren       int
	mostBooked, mostRSS, rssCap int64
	over                        []string
	cmdlines                    map[string]string // by model name
}

func sampleProvider(t *testing.T, f *providerFixture, ramCap int64) *providerSampler {
	s := &providerSampler{f: f, ramCap: ramCap, done: make(chan struct{}), cmdlines: map[string]string{}}
	names := map[string]string{}
	for n, p := range f.paths {
		names[p] = n
	}
	s.wg.Go(func() {
		for {
			s.sample(t, names)
			select {
			case <-s.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	return s
}

func (s *providerSampler) sample(t *testing.T, names map[string]string) {
	bs, err := s.f.ledger.Held()
	if err != nil {
		return
	}
	var booked, rss, bookedRunning int64
	children := 0
	for _, b := range bs {
		booked += b.Need["ram"]
		if b.ChildPID == 0 {
			continue
		}
		r, _, err := workload.ReadRSS(b.ChildPID)
		if err != nil {
			continue
		}
		children++
		rss += r
		bookedRunning += b.Need["ram"]
		if raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", b.ChildPID)); err == nil {
			if n := names[b.Model]; n != "" {
				s.mu.Lock()
				s.cmdlines[n] = strings.ReplaceAll(string(raw), "\x00", " ")
				s.mu.Unlock()
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	s.mostChildren = max(s.mostChildren, children)
	s.mostBooked, s.mostRSS = max(s.mostBooked, booked), max(s.mostRSS, rss)
	switch {
	case booked > s.ramCap:
		s.over = append(s.over, fmt.Sprintf("booked %d MiB of %d", booked>>20, s.ramCap>>20))
	case children > 2:
		s.over = append(s.over, fmt.Sprintf("%d children at once", children))
	case rss > bookedRunning:
		s.over = append(s.over, fmt.Sprintf("children resident %d MiB, booked %d", rss>>20, bookedRunning>>20))
	}
}

func (s *providerSampler) stop() {
	close(s.done)
	s.wg.Wait()
}

func (s *providerSampler) says() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d samples: at most %d children, %d MiB booked of %d, %d MiB resident",
		s.samples, s.mostChildren, s.mostBooked>>20, s.ramCap>>20, s.mostRSS>>20)
}

func (s *providerSampler) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.samples < 10 {
		t.Errorf("only %d samples", s.samples)
	}
	if len(s.over) > 0 {
		t.Errorf("over-committed at %d of %d samples, first: %s", len(s.over), s.samples, s.over[0])
	}
}

func (s *providerSampler) cmdline(model string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmdlines[model]
}

func getJSONInto(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: %d %v", url, resp.StatusCode, err)
	}
}
