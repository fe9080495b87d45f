package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/synth"
)

// residency samples the llama-servers serving a set of files: every one
// seen, how many ran at once at most, and the most resident memory they
// held together (VmRSS from /proc).
type residency struct {
	files map[string]bool
	stop  chan struct{}
	done  chan struct{}

	mu      sync.Mutex
	seen    map[string]bool
	peakN   int
	peakRSS int64
	lastN   int // running at the last sample
	args    []string
}

func sampleResidency(files ...string) *residency {
	r := &residency{files: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{}), seen: map[string]bool{}}
	for _, f := range files {
		r.files[f] = true
	}
	go func() {
		defer close(r.done)
		for {
			r.sample()
			select {
			case <-r.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return r
}

var vmRSS = regexp.MustCompile(`VmRSS:\s+(\d+) kB`)

func (r *residency) sample() {
	entries, _ := os.ReadDir("/proc")
	n, rss := 0, int64(0)
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		// llama-fit-params reads the same files, for a moment.
		if filepath.Base(args[0]) != "llama-server" {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if (args[i] == "-m" || args[i] == "--model") && r.files[args[i+1]] {
				status, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
				m := vmRSS.FindSubmatch(status)
				if err != nil || m == nil { // gone, or a zombie
					break
				}
				kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
				n, rss = n+1, rss+kb<<10
				r.mu.Lock()
				if !r.seen[e.Name()] {
					r.seen[e.Name()] = true
					r.args = append(r.args, e.Name()+": "+strings.Join(args, " "))
				}
				r.mu.Unlock()
				break
			}
		}
	}
	r.mu.Lock()
	r.peakN, r.peakRSS, r.lastN = max(r.peakN, n), max(r.peakRSS, rss), n
	r.mu.Unlock()
}

// end stops sampling: servers started, most at once, most memory.
func (r *residency) end() (started, peakN int, peakRSS int64) {
	close(r.stop)
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen), r.peakN, r.peakRSS
}

// scenarioRun is one server's answer to the scenario.
type scenarioRun struct {
	name                     string
	started, peakN, ended    int
	peakRSS                  int64
	lost, evictions, refused int
}

// runScenario streams a chat on each model of seq in turn from base and
// counts the answers that did not come whole.
func runScenario(t *testing.T, base string, seq []string) (lost int) {
	for _, m := range seq {
		resp, err := liveChat(context.Background(), base, m, true, 8)
		if err != nil {
			t.Logf("%s: %v", m, err)
			lost++
			continue
		}
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Logf("%s: %d %s", m, resp.StatusCode, b)
			lost++
		} else if chunks, done, err := sseChunks(resp.Body); err != nil || !done || len(chunks) == 0 {
			t.Logf("%s: %d chunks, done %v, %v", m, len(chunks), done, err)
			lost++
		}
		resp.Body.Close()
	}
	return lost
}

// TestLiveScenarioThreeOnTwo runs one scenario against headroom's
// provider and llama-server's own router: three models (a, b, c) on a
// machine whose memory holds two, asked a, b, c, a, b, c in turn. It
// measures servers started, evictions, the most running at once and the
// most resident memory they held together, and requests lost. headroom
// must never run more than two; the router's figures are logged for
// docs/provider.md, with its default --models-max (4) and with the one
// plan --router-preset computes for the set. Its 18 loads take minutes
// (about 500 s on the 2-core machine), so it runs for the figures, where
// HEADROOM_LIVE_SCENARIO=1; the provider's own behaviour is held in CI by
// the TestLiveProvider tests.
func TestLiveScenarioThreeOnTwo(t *testing.T) {
	if os.Getenv("HEADROOM_LIVE_SCENARIO") != "1" {
		t.Skip("18 llama-server loads for docs/provider.md's figures: set HEADROOM_LIVE_SCENARIO=1")
	}
	bin := liveEngine(t)
	dir := liveProviderDir(t)
	opts := providerOpts()
	snap := twoLoadMachine(t, "tinyllama-1.1b", synth.Q4_K_M, opts)
	var buf bytes.Buffer
	if err := snap.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	machine := filepath.Join(t.TempDir(), "machine.json")
	if err := os.WriteFile(machine, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	files := []string{filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf"), filepath.Join(dir, "c.gguf")}
	ini := filepath.Join(t.TempDir(), "models.ini")
	code, stdout, stderr := run(t, append([]string{"plan", "--router-preset", ini, "--machine", machine, "-c", "2048", "-np", "1", "--quiet"}, files...)...)
	if code != 0 {
		t.Fatalf("plan --router-preset: exit %d: %s%s", code, stdout, stderr)
	}
	m := regexp.MustCompile(`--models-max (\d+)\n`).FindStringSubmatch(stdout)
	if m == nil || m[1] != "2" {
		t.Fatalf("plan --router-preset on a machine that holds two: %s", stdout)
	}
	seq := []string{"a", "b", "c", "a", "b", "c"}
	var runs []scenarioRun

	// headroom's provider.
	fitParams, _ := engine.FindFitParams(bin, nil)
	f := startProviderOn(t, bin, fitParams, snap, opts, dir, nil)
	res := sampleResidency(files...)
	h := scenarioRun{name: "headroom serve-api"}
	h.lost = runScenario(t, f.srv.URL, seq)
	h.started, h.peakN, h.peakRSS = res.end()
	h.evictions = strings.Count(f.log.String(), "eviction ")
	h.refused = strings.Count(f.log.String(), "refusal ")
	for _, s := range f.states() {
		if s == "loaded" {
			h.ended++
		}
	}
	runs = append(runs, h)
	if h.lost != 0 || h.peakN > 2 || h.refused != 0 || h.started != 6 || h.evictions != 4 {
		t.Errorf("headroom: %+v; want six loads, four evictions, nothing lost or refused and never more than two servers at once\n%s", h, f.log.String())
	}
	// Its servers go before the router's run, which counts what runs.
	if err := f.pool.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	for _, limit := range []string{"4", m[1]} {
		runs = append(runs, routerScenario(t, bin, ini, limit, files, seq))
	}
	var table strings.Builder
	fmt.Fprintf(&table, "| server | started | evicted | most at once | most resident (RSS) | lost |\n|---|---|---|---|---|---|\n")
	for _, r := range runs {
		fmt.Fprintf(&table, "| %s | %d | %d | %d | %d MiB | %d |\n", r.name, r.started, r.evictions, r.peakN, r.peakRSS>>20, r.lost)
	}
	t.Logf("three models on a machine sized for two (%d MiB), asked %v:\n%s", snap.Domains[0].Capacity>>20, seq, table.String())
}

// routerScenario runs the scenario against llama-server's router on the
// presets file, with --models-max limit.
func routerScenario(t *testing.T, bin, ini, limit string, files, seq []string) scenarioRun {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	cmd := exec.Command(bin, "--models-preset", ini, "--models-max", limit, "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	var log syncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	// Its children are its own; a group lets the test end them all.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			cmd.Wait()
		}
	}
	defer stop()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(base + "/models"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the router did not start:\n%s", log.String())
		}
	}
	res := sampleResidency(files...)
	r := scenarioRun{name: "llama-server router, --models-max " + limit}
	r.lost = runScenario(t, base, seq)
	time.Sleep(time.Second) // an evicted server may take a moment to go
	r.started, r.peakN, r.peakRSS = res.end()
	t.Logf("%s started:\n%s", r.name, strings.Join(res.args, "\n"))
	r.ended = res.lastN
	r.evictions = r.started - r.ended
	return r
}
