package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/hw"
)

// noPrograms is a machine with no vendor tools and no llama-server.
type noPrograms struct{}

func (noPrograms) LookPath(file string) (string, error) { return "", errors.New("not installed") }
func (noPrograms) Output(context.Context, string, ...string) ([]byte, []byte, error) {
	return nil, nil, errors.New("not installed")
}

// TestRecommendStable: two runs of recommend on one machine rank the same,
// although every bandwidth measurement gives a different figure (a real
// one moves by tens of percent); --remeasure measures again.
func TestRecommendStable(t *testing.T) {
	home := t.TempDir()
	measured := 0
	env := func(out *bytes.Buffer) Env {
		return Env{Stdout: out, Stderr: out,
			Getenv: func(k string) string {
				if k == "HOME" {
					return home
				}
				return ""
			},
			Probe: func(ctx context.Context, o hw.ProbeOptions) (*hw.Snapshot, error) {
				o.Root, o.Runner, o.GOOS, o.Host, o.LlamaServer = os.DirFS("../hw/testdata/probe/cpu-cgroup2/root"), noPrograms{}, "linux", "t", "-"
				o.MeasureBandwidth = func(context.Context) (float64, string, error) {
					measured++
					return []float64{20, 200, 2}[(measured-1)%3], "measured here: fake", nil
				}
				return hw.Probe(ctx, o)
			}}
	}
	recommend := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if code := Main(context.Background(), append([]string{"recommend"}, args...), env(&out)); code != 0 {
			t.Fatalf("exit %d: %s", code, out.String())
		}
		return out.String()
	}
	first, second := recommend(), recommend()
	if first != second || measured != 1 {
		t.Errorf("after %d measurements, two runs differ:\n%s\n---\n%s", measured, first, second)
	}
	if !regexp.MustCompile(`, 20 GB/s \(measured here on \d{4}-\d{2}-\d{2}\)`).MatchString(first) {
		t.Errorf("the machine line does not show the figure and its date:\n%s", first)
	}
	third := recommend("--remeasure")
	if measured != 2 || !strings.Contains(third, "200 GB/s") {
		t.Errorf("--remeasure: %d measurements, output:\n%s", measured, third)
	}
}
