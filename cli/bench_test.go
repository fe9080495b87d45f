package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/engine/enginetest"
	"github.com/headroom-llm/headroom/speed"
)

// benchEngine is a fake llama-server with a stand-in llama-bench beside
// it, at 200 prompt and 20 generated tokens a second.
func benchEngine(t *testing.T) (llamaServer, calls string) {
	t.Helper()
	t.Setenv("FAKE_LLAMA_MODE", "good")
	fake := enginetest.BuildFake(t)
	bench, calls := enginetest.Bench(t, 200, 20)
	llamaServer = filepath.Join(filepath.Dir(bench), "llama-server")
	if err := os.Symlink(fake, llamaServer); err != nil {
		t.Fatal(err)
	}
	return llamaServer, calls
}

// plan --bench measures the chosen flags on a twin synth writes for a
// catalog variant, and puts llama-bench's figures in the JSON; fit
// --bench measures a local file itself, and measures nothing that does
// not fit.
func TestBench(t *testing.T) {
	llamaServer, calls := benchEngine(t)
	code, out, errOut := run(t, "plan", "qwen3-0.6b/Q8_0", "--machine", "cpu-32", "--llama-server", llamaServer,
		"--bench", "--bench-budget", "10m", "--json")
	var got struct {
		Verdict  string          `json:"verdict"`
		Measured *speed.Measured `json:"speed_measured"`
		Chosen   struct {
			Flags []string `json:"flags"`
		} `json:"chosen"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 {
		t.Fatalf("exit %d (%v):\n%s\n%s", code, err, out, errOut)
	}
	m := got.Measured
	if m == nil || m.Test("pp", 0) == nil || m.Test("tg", 0).MeanTPS != 20 || !strings.Contains(m.Twin, "synth") || m.Build != "abc1234" {
		t.Fatalf("measured %+v", m)
	}
	log, _ := os.ReadFile(calls)
	runs := strings.Split(strings.TrimSpace(string(log)), "\n")
	if len(runs) != 3 || !strings.Contains(runs[0], "twin.gguf -o json -ngl 0") || !strings.Contains(runs[2], " -d ") {
		t.Errorf("llama-bench ran %q", runs)
	}
	twin := strings.Fields(runs[0])[1]
	if _, err := os.Stat(twin); !os.IsNotExist(err) {
		t.Errorf("the twin %s is left behind (%v)", twin, err)
	}
	if !strings.Contains(errOut, "llama-bench: probing") {
		t.Errorf("no progress said:\n%s", errOut)
	}
	if !strings.Contains(m.Twin, "embedding, norms and expert routers") {
		t.Errorf("the twin is not said to be routed: %q", m.Twin)
	}
	// The text beside the plan keeps to 100 columns, the twin's long
	// description and the budget's notes wrapped.
	_, text, _ := run(t, "plan", "qwen3-0.6b/Q8_0", "--machine", "cpu-32", "--llama-server", llamaServer, "--bench", "--bench-budget", "10m")
	// The estimate is held to the fastest repetition, which is what a
	// calibration fits.
	if !strings.Contains(strings.Join(strings.Fields(text), " "), "off the fastest repetition measured (20.0)") {
		t.Errorf("plan --bench does not compare the estimate with the fastest repetition:\n%s", text)
	}
	for _, line := range strings.Split(text, "\n") {
		if n := utf8.RuneCountInString(line); n > textWidth && !strings.Contains(line, " \\") {
			t.Errorf("a line of %d columns:\n%s", n, line)
		}
	}

	os.Remove(calls)
	file := synthFile(t, "qwen3-0.6b")
	code, out, errOut = run(t, "fit", file, "-c", "4096", "-np", "1", "--machine", "cpu-32", "--llama-server", llamaServer, "--bench", "--quiet")
	log, _ = os.ReadFile(calls)
	if code != 0 || !strings.Contains(out, "measured by llama-bench abc1234") || !strings.Contains(out, "the model file itself") ||
		!strings.Contains(string(log), "-m "+file+" ") {
		t.Errorf("fit --bench: exit %d\n%s\n%s\ncalls %s", code, out, errOut, log)
	}

	os.Remove(calls)
	_, out, _ = run(t, "fit", file, "-c", "4000000", "-np", "1", "--machine", "cpu-32", "--llama-server", llamaServer, "--bench", "--quiet", "--json")
	if !strings.Contains(out, `"verdict": "does_not_fit"`) {
		t.Fatalf("the profile meant not to fit:\n%s", out)
	}
	if _, err := os.Stat(calls); !os.IsNotExist(err) || strings.Contains(out, "speed_measured") {
		t.Errorf("fit --bench of a profile that does not fit ran llama-bench")
	}
}

// Without a llama-bench, --bench says which program is missing and where
// it was looked for.
func TestBenchWithoutLlamaBench(t *testing.T) {
	t.Setenv("FAKE_LLAMA_MODE", "good")
	dir := t.TempDir()
	llamaServer := filepath.Join(dir, "llama-server")
	if err := os.Symlink(enginetest.BuildFake(t), llamaServer); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	code, _, errOut := run(t, "plan", "qwen3-0.6b/Q8_0", "--machine", "cpu-32", "--llama-server", llamaServer, "--bench", "--quiet")
	if code == 0 || !strings.Contains(errOut, "llama-bench not found beside") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

// The engine check's heading wraps at 100 columns whatever the path of
// llama-fit-params and whether it agrees.
func TestPrintCheckWidth(t *testing.T) {
	for _, agrees := range []bool{true, false} {
		var b strings.Builder
		printCheck(&b, &engine.Check{Engine: "/home/someone/src/llama.cpp/build/bin/llama-fit-params", Agrees: agrees,
			Cells: []engine.CheckCell{{Row: "CPU", Part: "model", Engine: 400, Headroom: 401, Agrees: agrees}}})
		for _, line := range strings.Split(b.String(), "\n") {
			if n := utf8.RuneCountInString(line); n > textWidth {
				t.Errorf("agrees %v: a line of %d columns:\n%s", agrees, n, line)
			}
		}
		if !strings.Contains(b.String(), "engine check:") || agrees == strings.Contains(b.String(), "DIFFERS") {
			t.Errorf("agrees %v:\n%s", agrees, b.String())
		}
	}
}
