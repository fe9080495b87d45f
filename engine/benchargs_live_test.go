package engine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/plan"
)

// TestBenchArgsTakenByLlamaBench: every flag BenchArgs writes is one the
// llama-bench beside HEADROOM_LLAMA_SERVER lists in its own --help
// (llama-bench parses its flags itself, apart from llama.cpp's common
// table), so --bench gives the tool only what it takes.
func TestBenchArgsTakenByLlamaBench(t *testing.T) {
	bin := os.Getenv("HEADROOM_LLAMA_SERVER")
	if bin == "" {
		t.Skip("HEADROOM_LLAMA_SERVER names no llama-server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(filepath.Dir(bin), "llama-bench"), "--help").CombinedOutput()
	if err != nil && len(out) == 0 {
		t.Fatalf("llama-bench --help: %v", err)
	}
	taken := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  (-[^ ,<]+)(?:,? (-[^ ,<]+))?`).FindAllStringSubmatch(string(out), -1) {
		taken[m[1]], taken[m[2]] = true, true
	}
	p := plan.Defaults()
	p.GPULayers, p.FlashAttn, p.CacheK, p.CacheV, p.Batch, p.UBatch, p.CPUMoE = 10, plan.FlashOn, "q8_0", "q8_0", 1024, 256, 2
	p.Overrides = []plan.Override{{Pattern: "exps", Buft: "CPU"}}
	p.TensorSplit, p.NoKVOffload, p.Mmap = []float64{1, 1}, true, false
	args := BenchArgs(p)
	for _, a := range args {
		if strings.HasPrefix(a, "-") && !taken[a] {
			t.Errorf("BenchArgs writes %s, which llama-bench --help does not list (args %q)", a, args)
		}
	}
}
