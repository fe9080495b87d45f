package cli

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/synth"
)

// BenchmarkDefaultPlanLoad starts the real llama-server with the flags
// headroom plan gives the catalog's small models on this machine and
// times it until it answers /health (s/ready): on system memory the plan
// sizes context by need, so the load takes seconds, not the half minute
// llama.cpp's own fit takes filling RAM with context (docs/serving.md).
func BenchmarkDefaultPlanLoad(b *testing.B) {
	bin := liveEngine(b)
	dir := b.TempDir()
	for _, m := range []struct {
		shape string
		q     synth.Quant
	}{
		{"qwen3-0.6b", synth.Q8_0},
		{"qwen3.5-0.8b", synth.Q8_0},
		{"llama-3.2-1b", synth.Q4_K_M},
		{"gemma-3-1b", synth.Q8_0},
		{"lfm2-1.2b", synth.Q4_K_M},
	} {
		path := writeShape(b, dir, m.shape, m.q)
		var out, errOut bytes.Buffer
		home := filepath.Join(dir, "home-"+m.shape)
		vars := map[string]string{"HOME": home, "XDG_CACHE_HOME": filepath.Join(home, "cache"), "XDG_DATA_HOME": filepath.Join(home, "data"),
			"HF_HUB_OFFLINE": "1", "PATH": os.Getenv("PATH")}
		env := Env{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] }}
		if code := Main(context.Background(), []string{"plan", path, "--print-args", "--quiet", "--llama-server", bin}, env); code != 0 {
			b.Fatalf("plan %s: exit %d: %s", m.shape, code, errOut.String())
		}
		args := strings.Fields(out.String())
		b.Run(m.shape+"/"+string(m.q), func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				total += timeReady(b, bin, path, args)
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/ready")
			b.Logf("%s %s", m.shape, strings.Join(args, " "))
		})
	}
}

// timeReady starts llama-server and times it until /health answers 200.
func timeReady(b *testing.B, bin, model string, args []string) time.Duration {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, append([]string{"-m", model, "--host", "127.0.0.1", "--port", strconv.Itoa(port)}, args...)...)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/health"
	for time.Since(start) < 5*time.Minute {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("llama-server %v not ready in 5 minutes", args)
	return 0
}
