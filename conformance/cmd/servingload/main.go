// Command servingload runs one serving workload against the real
// llama-server on a synth shape and prints what it measured as JSON: the
// resident memory at load and at its peak while distinct prompts fill the
// prompt cache and the context checkpoints. With -golden DIR it writes the
// measurement there as a serving golden (docs/serving.md), which
// conformance's TestServingGoldens holds headroom's serving peak to.
//
//	go run ./conformance/cmd/servingload -server BIN -shape qwen3-0.6b -quant Q8_0 \
//	    -ctx 4096 -np 1 -cram 128 -tokens 300 -golden conformance/testdata/serving
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/headroom-llm/headroom/conformance"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "servingload:", err)
		os.Exit(1)
	}
}

// optInt is an int flag that may be left unset.
type optInt struct{ v *int }

func (o *optInt) String() string {
	if o.v == nil {
		return ""
	}
	return strconv.Itoa(*o.v)
}

func (o *optInt) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return err
	}
	o.v = &n
	return nil
}

func run() error {
	c := conformance.ServingCase{Backend: "cpu"}
	w := &c.Workload
	server := flag.String("server", os.Getenv("HEADROOM_LLAMA_SERVER"), "llama-server binary")
	flag.StringVar(&c.Shape, "shape", "", "synth shape")
	flag.IntVar(&c.Layers, "layers", 0, "keep only the first N layers")
	flag.StringVar(&c.Quant, "quant", "Q8_0", "synth quant")
	flag.IntVar(&c.Ctx, "ctx", 4096, "-c")
	flag.IntVar(&c.Parallel, "np", 1, "-np")
	cram, ctxcp, cms := &optInt{}, &optInt{}, &optInt{}
	flag.Var(cram, "cram", "-cram MiB (default: llama-server's)")
	flag.Var(ctxcp, "ctxcp", "-ctxcp (default: llama-server's)")
	flag.Var(cms, "cms", "-cms (default: llama-server's)")
	flag.IntVar(&w.Tokens, "tokens", 300, "tokens per prompt")
	flag.IntVar(&w.MinPrompts, "min", 4, "least prompts")
	flag.IntVar(&w.MaxPrompts, "max", 40, "most prompts")
	flag.IntVar(&w.SettleAfter, "settle", 3, "stop once the peak grew by at most -settle-mib over this many rounds")
	settle := flag.Int64("settle-mib", 4, "MiB")
	flag.IntVar(&w.Concurrent, "concurrent", 1, "prompts at once")
	flag.IntVar(&w.Turns, "turns", 1, "turns of each conversation: each prompt the last and -tokens more")
	flag.IntVar(&w.VocabLo, "lo", 1000, "least token id")
	flag.IntVar(&w.VocabHi, "hi", 30000, "token ids below this")
	golden := flag.String("golden", "", "write the measurement as a serving golden into this folder")
	flag.Parse()
	if c.Shape == "" || *server == "" {
		return fmt.Errorf("need -shape and -server (or HEADROOM_LLAMA_SERVER)")
	}
	c.CacheRAM, c.Checkpoints, c.CheckpointMinStep = cram.v, ctxcp.v, cms.v
	w.SettleBytes = *settle << 20
	w.Args = c.Args()
	c.ID = caseID(&c)

	dir, err := os.MkdirTemp("", "servingload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if w.Model, err = c.WriteModel(dir); err != nil {
		return err
	}
	w.Server = *server
	start := time.Now()
	w.Progress = func(n int, rss int64) {
		fmt.Fprintf(os.Stderr, "%s %6.1fs prompts %d peak %.1f MiB\n", c.ID, time.Since(start).Seconds(), n, float64(rss)/(1<<20))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	r, err := w.Run(ctx)
	if err != nil {
		return err
	}
	c.Run = *r
	c.CPUFeatures = conformance.CPUFeaturesOf(r.Log)
	v, _ := exec.Command(*server, "--version").CombinedOutput()
	for _, line := range strings.Split(string(v), "\n") {
		if strings.HasPrefix(line, "version:") {
			c.Engine = strings.TrimSpace(line)
		}
	}
	c.Measured = time.Now().UTC().Format("2006-01-02")
	out, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	if *golden != "" {
		return os.WriteFile(filepath.Join(*golden, c.ID+".json"), append(out, '\n'), 0o644)
	}
	return nil
}

// caseID names a case by what it ran.
func caseID(c *conformance.ServingCase) string {
	id := c.Shape
	if c.Layers > 0 {
		id += ".l" + strconv.Itoa(c.Layers)
	}
	id += fmt.Sprintf(".%s.%s.c%dx%d", c.Quant, c.Backend, c.Ctx, c.Parallel)
	for _, f := range []struct {
		name string
		v    *int
	}{{"cram", c.CacheRAM}, {"ctxcp", c.Checkpoints}, {"cms", c.CheckpointMinStep}} {
		if f.v != nil {
			id += "." + f.name + strconv.Itoa(*f.v)
		}
	}
	return id
}
