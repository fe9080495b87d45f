package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

// TestExitStatus holds fit, plan and recommend to one rule: 0 fits, 1
// does not fit or is incompatible, 2 for a command line that is wrong;
// with --json too, and with the verdict printed either way.
func TestExitStatus(t *testing.T) {
	small := synthFile(t, "tinyllama-1.1b")
	huge := synthFile(t, "kimi-k2")
	b := gguf.NewBuilder()
	b.Set("general.architecture", gguf.StringValue("futurenet"))
	if err := b.AddTensor("w", gguf.TypeF32, []uint64{32}, nil); err != nil {
		t.Fatal(err)
	}
	unknown := filepath.Join(t.TempDir(), "futurenet.gguf")
	if err := b.WriteFile(unknown); err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(t.TempDir(), "cut.gguf")
	data, err := os.ReadFile(small)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(truncated, data[:1000], 0o644); err != nil {
		t.Fatal(err)
	}
	missing, dir := filepath.Join(t.TempDir(), "nope.gguf"), t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		out  string // what stdout must say
		errs string // what stderr must say
	}{
		// Bad input is a wrong command line: status 2, whatever the command.
		{args: []string{"fit", missing, "--machine", "cpu-32"}, code: exitUsage, errs: "no such file"},
		{args: []string{"plan", missing, "--machine", "cpu-32"}, code: exitUsage, errs: "no such file"},
		{args: []string{"fit", dir, "--machine", "cpu-32"}, code: exitUsage, errs: "directory"},
		{args: []string{"plan", dir, "--machine", "cpu-32"}, code: exitUsage, errs: "directory"},
		{args: []string{"fit", truncated, "--machine", "cpu-32"}, code: exitUsage, errs: "and the file has 984 left of its 1000: file is truncated"},
		{args: []string{"plan", truncated, "--machine", "cpu-32", "--json"}, code: exitUsage, errs: "file is truncated"},
		{args: []string{"fit", small, "--machine", "nosuchmachine"}, code: exitUsage, errs: "--machine: hw: \"nosuchmachine\" is neither a preset"},
		{args: []string{"plan", small, "--machine", "/nope/machine.json"}, code: exitUsage, errs: "--machine: hw: reading machine file"},
		{args: []string{"recommend", "--machine", "nosuchmachine"}, code: exitUsage, errs: "is neither a preset"},
		{args: []string{"fit", small, "--machine", "cpu-32", "-c", "4096"}, code: exitOK, out: "fits: tinyllama-1.1b.gguf needs"},
		{args: []string{"fit", huge, "--machine", "cpu-32", "-c", "4096"}, code: exitError, out: "does not fit: kimi-k2.gguf needs"},
		{args: []string{"fit", huge, "--machine", "cpu-32", "--json"}, code: exitError, out: `"verdict": "does_not_fit"`},
		{args: []string{"fit", unknown, "--machine", "cpu-32"}, code: exitError, out: "incompatible: architecture \"futurenet\""},
		{args: []string{"fit", small, "--machine", "cpu-32", "-c", "-5"}, code: exitUsage, out: ""},
		{args: []string{"plan", small, "--machine", "cpu-32"}, code: exitOK, out: "llama-server -m "},
		{args: []string{"plan", huge, "--machine", "cpu-32"}, code: exitError, out: ""},
		{args: []string{"plan", huge, "--machine", "cpu-32", "--json"}, code: exitError, out: `"verdict": "does_not_fit"`},
		{args: []string{"plan", unknown, "--machine", "cpu-32", "--json"}, code: exitError, out: `"verdict": "incompatible"`},
		{args: []string{"plan", small, "--machine", "cpu-32", "--goal", "fastest"}, code: exitUsage, out: ""},
		{args: []string{"recommend", "--machine", "cpu-32", "--json", "--capability", "vision"}, code: exitOK, out: `"enabled": true`},
		{args: []string{"recommend", "--machine", "cpu-32", "--json", "--fit-target", "1048576"}, code: exitError, out: `"enabled": false`},
		{args: []string{"recommend", "--machine", "cpu-32", "--fit-target", "1048576"}, code: exitError, out: "do not fit and 0 are incompatible"},
		{args: []string{"recommend", "--machine", "cpu-32", "--json", "--goal", "fastest"}, code: exitUsage, out: ""},
	} {
		args := append([]string{tc.args[0], "--quiet"}, tc.args[1:]...)
		if tc.args[0] == "recommend" {
			args = tc.args
		}
		code, out, errs := run(t, args...)
		if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errs, tc.errs) {
			t.Errorf("%s: exit %d, want %d; stdout lacks %q or stderr %q?\n%s\n%s", strings.Join(tc.args, " "), code, tc.code, tc.out, tc.errs, out, errs)
		}
		if tc.code != exitOK && !strings.Contains(out, `"enabled": true`) && errs == "" {
			t.Errorf("%s: exit %d with nothing on standard error", strings.Join(tc.args, " "), code)
		}
	}
}
