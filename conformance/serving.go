package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/headroom-llm/headroom/engine/workload"
	"github.com/headroom-llm/headroom/synth"
)

// Workload is a serving workload: llama-server started on a model with
// given flags, then driven by workload.Workload (distinct prompts of token
// ids until what it keeps past the load stops growing, its resident
// memory sampled all along).
type Workload struct {
	workload.Workload
	// Server is the llama-server binary.
	Server string `json:"-"`
	// Model is the GGUF file.
	Model string `json:"-"`
	// Args are llama-server's flags besides -m, --host and --port.
	Args []string `json:"args"`
}

// ServingRun is what a workload measured.
type ServingRun = workload.ServingRun

// Run starts the server, drives the workload and stops the server.
func (w Workload) Run(ctx context.Context) (*ServingRun, error) {
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
	ready := time.Since(start).Seconds()
	run, err := w.Workload.Drive(ctx, base, cmd.Process.Pid)
	if run != nil {
		run.ReadySeconds, run.Log = ready, logBuf.String()
	}
	return run, err
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

// Synth is the case's synthetic model: its shape, cut to its first
// Layers where it has some, and its quantization.
func (c *ServingCase) Synth() (synth.Shape, synth.Quant, error) {
	s, ok := synth.Lookup(c.Shape)
	if !ok {
		return s, "", fmt.Errorf("conformance: %s: no synth shape %q", c.ID, c.Shape)
	}
	if c.Layers > 0 {
		var err error
		if s, err = s.FirstLayers(c.Layers); err != nil {
			return s, "", err
		}
	}
	q, err := synth.ParseQuant(c.Quant)
	return s, q, err
}

// WriteModel writes the case's synthetic GGUF (a sparse file) into dir.
func (c *ServingCase) WriteModel(dir string) (string, error) {
	s, q, err := c.Synth()
	if err != nil {
		return "", err
	}
	b, err := synth.Build(s, q)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, c.ID+".gguf")
	return path, b.WriteFile(path)
}
