package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Workload is a serving workload: llama-server started on a model with
// given flags, then sent distinct prompts of token ids (which work with
// the synthetic vocabularies of synth's files) until what it keeps past
// the load stops growing, its resident memory sampled all along.
type Workload struct {
	// Server is the llama-server binary.
	Server string `json:"-"`
	// Model is the GGUF file.
	Model string `json:"-"`
	// Args are llama-server's flags besides -m, --host and --port.
	Args []string `json:"args"`
	// Tokens is each prompt's length.
	Tokens int `json:"tokens"`
	// MinPrompts and MaxPrompts bound the prompts sent: at least
	// MinPrompts, then until the peak has not grown by more than
	// SettleBytes over the last SettleAfter prompts, at most MaxPrompts.
	MinPrompts  int   `json:"min_prompts"`
	MaxPrompts  int   `json:"max_prompts"`
	SettleAfter int   `json:"settle_after"`
	SettleBytes int64 `json:"settle_bytes"`
	// Concurrent is how many prompts are in flight at once (one per slot
	// fills every slot).
	Concurrent int `json:"concurrent"`
	// VocabLo and VocabHi bound the token ids drawn, clear of the
	// special tokens at either end of a vocabulary.
	VocabLo, VocabHi int `json:"-"`
	// Seed makes the prompts repeatable.
	Seed uint64 `json:"seed"`
	// Progress, if set, hears of each prompt answered.
	Progress func(n int, rss int64) `json:"-"`
}

// ServingRun is what a workload measured.
type ServingRun struct {
	// LoadRSS is the server's resident memory once it answers /health,
	// before any prompt.
	LoadRSS int64 `json:"load_rss"`
	// PeakRSS is the most resident memory sampled (every 20 ms).
	PeakRSS int64 `json:"peak_rss"`
	// PeakAnon is the most anonymous resident memory sampled: RSS less
	// the file's mapped pages.
	PeakAnon int64 `json:"peak_anon"`
	// FinalRSS is the resident memory after the last prompt.
	FinalRSS int64 `json:"final_rss"`
	// Prompts is how many prompts were answered.
	Prompts int `json:"prompts"`
	// PeakCgroup is the cgroup's memory.peak over the run where the
	// server ran in one of its own (0 otherwise).
	PeakCgroup int64 `json:"peak_cgroup,omitempty"`
	// ReadySeconds is how long the server took from its start to answer
	// /health.
	ReadySeconds float64 `json:"ready_seconds"`
	// Log is the server's log, for the buffer lines.
	Log string `json:"-"`
}

// Run starts the server, drives the workload and stops the server.
func (w Workload) Run(ctx context.Context) (*ServingRun, error) {
	if w.Tokens <= 0 || w.MaxPrompts <= 0 || w.VocabHi <= w.VocabLo {
		return nil, fmt.Errorf("conformance: workload needs tokens, prompts and a vocabulary range, got %d tokens, %d prompts, ids %d..%d", w.Tokens, w.MaxPrompts, w.VocabLo, w.VocabHi)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := append([]string{"-m", w.Model, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "-lv", "4"}, w.Args...)
	cmd := exec.CommandContext(ctx, w.Server, args...)
	var logBuf syncBuffer
	cmd.Stdout, cmd.Stderr = &logBuf, &logBuf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("conformance: starting %s: %w", w.Server, err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	start := time.Now()
	if err := waitHealthy(ctx, base, cmd, &logBuf); err != nil {
		return nil, err
	}
	run := &ServingRun{ReadySeconds: time.Since(start).Seconds()}
	rss, _, err := readRSS(cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	run.LoadRSS = rss
	sampler := startSampler(cmd.Process.Pid)
	err = w.drive(ctx, base, cmd.Process.Pid, run, sampler)
	run.PeakRSS, run.PeakAnon = sampler.stop()
	run.Log = logBuf.String()
	if err != nil {
		return run, err
	}
	run.FinalRSS, _, _ = readRSS(cmd.Process.Pid)
	return run, nil
}

// drive sends the prompts, Concurrent at a time, until the peak settles.
func (w Workload) drive(ctx context.Context, base string, pid int, run *ServingRun, s *sampler) error {
	rng := rand.New(rand.NewPCG(w.Seed, 0x5e7))
	conc := max(w.Concurrent, 1)
	var history []int64
	for run.Prompts < w.MaxPrompts {
		prompts := make([][]int, conc)
		for i := range prompts {
			p := make([]int, w.Tokens)
			for j := range p {
				p[j] = w.VocabLo + rng.IntN(w.VocabHi-w.VocabLo)
			}
			prompts[i] = p
		}
		errs := make([]error, conc)
		var wg sync.WaitGroup
		for i := range prompts {
			wg.Go(func() { errs[i] = complete(ctx, base, prompts[i]) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		run.Prompts += conc
		peak := s.peak()
		if w.Progress != nil {
			w.Progress(run.Prompts, peak)
		}
		history = append(history, peak)
		if n := len(history); run.Prompts >= w.MinPrompts && w.SettleAfter > 0 && n > w.SettleAfter &&
			peak-history[n-1-w.SettleAfter] <= w.SettleBytes {
			break
		}
	}
	return nil
}

// complete asks for one token after prompt, keeping the prompt in the
// cache as a client does by default.
func complete(ctx context.Context, base string, prompt []int) error {
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": 1, "cache_prompt": true, "temperature": 0})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/completion", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("conformance: /completion: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("conformance: /completion answered %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	return nil
}

func waitHealthy(ctx context.Context, base string, cmd *exec.Cmd, log *syncBuffer) error {
	exited := make(chan struct{})
	go func() {
		// Only to notice an early exit; Run's deferred Wait reaps it.
		for {
			if cmd.ProcessState != nil || processGone(cmd.Process.Pid) {
				close(exited)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return fmt.Errorf("conformance: llama-server exited before it was ready:\n%s", tail(log.String(), 2000))
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := http.Get(base + "/health")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
	}
	return fmt.Errorf("conformance: llama-server not ready in 10 minutes:\n%s", tail(log.String(), 2000))
}

func processGone(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	// The state follows the command's closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// readRSS reads a process's resident memory, in all and anonymous, from
// /proc/PID/status (VmRSS, RssAnon).
func readRSS(pid int) (rss, anon int64, err error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			rss = n << 10
		case "RssAnon":
			anon = n << 10
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("conformance: no VmRSS in /proc/%d/status", pid)
	}
	return rss, anon, sc.Err()
}

// sampler reads a process's resident memory every 20 ms and keeps the
// most seen.
type sampler struct {
	mu         sync.Mutex
	rss, anon  int64
	done, quit chan struct{}
}

func startSampler(pid int) *sampler {
	s := &sampler{done: make(chan struct{}), quit: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if rss, anon, err := readRSS(pid); err == nil {
				s.mu.Lock()
				s.rss, s.anon = max(s.rss, rss), max(s.anon, anon)
				s.mu.Unlock()
			}
			select {
			case <-s.quit:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) peak() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rss
}

func (s *sampler) stop() (rss, anon int64) {
	close(s.quit)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rss, s.anon
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// syncBuffer is a bytes.Buffer safe for a process's two streams.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ServingCase is a serving golden: a workload measured against the real
// llama-server, with what headroom needs to account the same server (a
// synth shape, quant and llama-server's flags as fields).
type ServingCase struct {
	ID    string `json:"id"`
	Shape string `json:"shape"`
	// Layers keeps only the first Layers of the shape (0: all).
	Layers   int    `json:"layers,omitempty"`
	Quant    string `json:"quant"`
	Backend  string `json:"backend"`
	Ctx      int    `json:"ctx"`
	Parallel int    `json:"parallel"`
	// CacheRAM, Checkpoints and CheckpointMinStep are -cram, -ctxcp and
	// -cms; nil is llama-server's default.
	CacheRAM          *int `json:"cache_ram_mib,omitempty"`
	Checkpoints       *int `json:"ctx_checkpoints,omitempty"`
	CheckpointMinStep *int `json:"checkpoint_min_step,omitempty"`
	// Workload is how the server was driven (its Args are the flags it
	// ran with, the model aside).
	Workload Workload `json:"workload"`
	// Engine is llama-server's --version line; CPUFeatures what its
	// system_info line reported of AVX2 and AVX512, which decide the
	// repacked weights.
	Engine      string     `json:"engine"`
	CPUFeatures []string   `json:"cpu_features"`
	Run         ServingRun `json:"run"`
	// Measured is the date of the run.
	Measured string `json:"measured"`
	Path     string `json:"-"`
}

// Args are llama-server's flags for the case, the model aside: what
// headroom's plan would write for this profile (-ngl 0 --fit off on the
// CPU) and the serving flags the case sets.
func (c *ServingCase) Args() []string {
	a := []string{"-c", strconv.Itoa(c.Ctx), "-np", strconv.Itoa(c.Parallel), "-ngl", "0", "--fit", "off"}
	for _, f := range []struct {
		flag string
		v    *int
	}{{"-cram", c.CacheRAM}, {"-ctxcp", c.Checkpoints}, {"-cms", c.CheckpointMinStep}} {
		if f.v != nil {
			a = append(a, f.flag, strconv.Itoa(*f.v))
		}
	}
	return a
}

// LoadServing reads every serving golden in dir.
func LoadServing(dir string) ([]ServingCase, error) {
	return LoadDir(dir, "serving goldens", func(path string, data []byte) (ServingCase, []string, error) {
		var c ServingCase
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return c, nil, err
		}
		c.Path = path
		var problems []string
		switch {
		case c.ID == "" || c.Shape == "" || c.Quant == "":
			problems = append(problems, "no id, shape or quant")
		case c.Ctx <= 0 || c.Parallel <= 0:
			problems = append(problems, fmt.Sprintf("context %d and slots %d: want both above 0", c.Ctx, c.Parallel))
		case c.Run.LoadRSS <= 0 || c.Run.PeakRSS < c.Run.LoadRSS:
			problems = append(problems, fmt.Sprintf("load RSS %d and peak %d: want a peak of at least the load", c.Run.LoadRSS, c.Run.PeakRSS))
		case c.Run.Prompts <= 0:
			problems = append(problems, "no prompts answered")
		}
		if want := strings.Join(c.Args(), " "); strings.Join(c.Workload.Args, " ") != want {
			problems = append(problems, fmt.Sprintf("ran with %q, the case's flags are %q", strings.Join(c.Workload.Args, " "), want))
		}
		return c, problems, nil
	})
}

// CPUFeaturesOf reads the AVX2 and AVX512 flags of llama.cpp's
// system_info line in a log.
func CPUFeaturesOf(log string) []string {
	var out []string
	for _, f := range []string{"AVX2", "AVX512"} {
		if strings.Contains(log, f+" = 1") {
			out = append(out, strings.ToLower(f))
		}
	}
	return out
}
