package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/synth"
)

// TestRelativePathToolsNotRun: with a relative PATH entry first
// (PATH=bin:...), a llama-fit-params, llama-bench or llama-server planted
// in ./bin is never run, by a plain plan of an architecture only
// llama.cpp's projection answers, by fit --bench or by serve; each says
// why it did not use them. The planted tools would leave a mark if run.
func TestRelativePathToolsNotRun(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	mark := filepath.Join(dir, "ran")
	for _, tool := range []string{"llama-server", "llama-fit-params", "llama-bench"} {
		script := "#!/bin/sh\necho " + tool + " >> " + mark + "\nexit 1\n"
		if err := os.WriteFile(filepath.Join(bin, tool), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	model := writeShapeAs(t, dir, "tinyllama-1.1b", "ernie4_5", synth.Q4_K_M)
	modeled := synthFile(t, "qwen3-0.6b")
	t.Chdir(dir)
	t.Setenv("PATH", "bin:/usr/bin:/bin")
	runs := [][]string{
		{"plan", "--machine", "cpu-32", model},
		{"fit", "--machine", "cpu-32", modeled, "-c", "1024", "--bench"},
		{"serve", "--machine", "cpu-32", modeled, "--no-pull"},
	}
	for _, args := range runs {
		_, out, errs := run(t, args...)
		said := strings.Join(strings.Fields(out+errs), " ")
		if !strings.Contains(said, "relative") {
			t.Errorf("%s: does not say the relative PATH entry was refused:\n%s", strings.Join(args, " "), said)
		}
	}
	if ran, err := os.ReadFile(mark); err == nil {
		t.Errorf("planted tools ran: %s", ran)
	}
}
