package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestFitProgram runs fit for each program on one file: the verdict and
// the command name the program, the JSON says it, and the defaults are
// the program's (-np 1 for all but llama-server).
func TestFitProgram(t *testing.T) {
	path := synthFile(t, "qwen3-0.6b")
	for _, tc := range []struct {
		program, verdict, command string
		parallel                  int
	}{
		{"llama-server", "fits: ", "llama-server -m ", 4},
		{"llama-cli", "fits (llama-cli): ", "llama-cli -m ", 1},
		{"llama-completion", "fits (llama-completion): ", "llama-completion -m ", 1},
		{"library", "fits (a library context): ", "library: n_gpu_layers=", 1},
	} {
		code, out, errs := run(t, "fit", path, "--machine", "cpu-32", "-c", "4096", "--program", tc.program, "--quiet")
		lines := strings.Split(out, "\n")
		if code != 0 || len(lines) < 2 || !strings.HasPrefix(lines[0], tc.verdict) || !strings.HasPrefix(lines[1], tc.command) {
			t.Errorf("%s: exit %d, %q...: %s", tc.program, code, lines[:min(2, len(lines))], errs)
		}
		_, js, _ := run(t, "fit", path, "--machine", "cpu-32", "-c", "4096", "--program", tc.program, "--quiet", "--json")
		var got struct {
			Program string `json:"program"`
			Profile struct {
				Parallel int `json:"parallel"`
			} `json:"profile"`
		}
		if err := json.Unmarshal([]byte(js), &got); err != nil || got.Program != tc.program || got.Profile.Parallel != tc.parallel {
			t.Errorf("%s: JSON program %q, -np %d (%v)", tc.program, got.Program, got.Profile.Parallel, err)
		}
	}
}

// TestProgramRefuses holds the flags a program does not take to exit 2.
func TestProgramRefuses(t *testing.T) {
	path := synthFile(t, "qwen3-0.6b")
	for _, args := range [][]string{
		{"fit", path, "--program", "llama-cli", "-np", "2", "-kvu"},
		{"fit", path, "--program", "llama-completion", "-kvu"},
		{"fit", path, "--program", "library", "--n-cpu-moe", "2"},
		{"fit", path, "--program", "library", "--verify"},
		{"fit", path, "--program", "llama-cli", "--bench"},
		{"fit", path, "--program", "llama-run"},
		{"plan", path, "--program", "nope"},
		{"plan", path, "--program", "llama-cli", "--verify"},
	} {
		code, _, errs := run(t, append(args, "--machine", "cpu-32", "--quiet")...)
		if code != 2 || !strings.Contains(errs, "program") && !strings.Contains(errs, "-kvu") {
			t.Errorf("%v: exit %d, %s", args, code, errs)
		}
	}
}

// TestPlanProgram plans for llama-cli and a library context: one
// sequence by default and the program's command line first.
func TestPlanProgram(t *testing.T) {
	path := synthFile(t, "qwen3-0.6b")
	for _, tc := range []struct{ program, head string }{
		{"llama-cli", "llama-cli -m "},
		{"library", "library: n_gpu_layers="},
	} {
		code, out, errs := run(t, "plan", path, "--machine", "cpu-32", "--program", tc.program, "--quiet")
		if code != 0 || !strings.HasPrefix(out, tc.head) || !strings.Contains(out, "1 slot of") {
			t.Errorf("%s: exit %d: %.200s %s", tc.program, code, out, errs)
		}
		_, js, _ := run(t, "plan", path, "--machine", "cpu-32", "--program", tc.program, "--quiet", "--json")
		var got struct {
			Program string `json:"program"`
		}
		if err := json.Unmarshal([]byte(js), &got); err != nil || got.Program != tc.program {
			t.Errorf("%s: JSON program %q (%v)", tc.program, got.Program, err)
		}
	}
}
