package cli

import (
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
	for _, tc := range []struct {
		args []string
		code int
		out  string // what stdout must say
	}{
		{[]string{"fit", small, "--machine", "cpu-32", "-c", "4096"}, exitOK, "fits: tinyllama-1.1b.gguf needs"},
		{[]string{"fit", huge, "--machine", "cpu-32", "-c", "4096"}, exitError, "does not fit: kimi-k2.gguf needs"},
		{[]string{"fit", huge, "--machine", "cpu-32", "--json"}, exitError, `"verdict": "does_not_fit"`},
		{[]string{"fit", unknown, "--machine", "cpu-32"}, exitError, "incompatible: architecture \"futurenet\""},
		{[]string{"fit", small, "--machine", "cpu-32", "-c", "-5"}, exitUsage, ""},
		{[]string{"plan", small, "--machine", "cpu-32"}, exitOK, "llama-server -m "},
		{[]string{"plan", huge, "--machine", "cpu-32"}, exitError, ""},
		{[]string{"plan", huge, "--machine", "cpu-32", "--json"}, exitError, `"verdict": "does_not_fit"`},
		{[]string{"plan", unknown, "--machine", "cpu-32", "--json"}, exitError, `"verdict": "incompatible"`},
		{[]string{"plan", small, "--machine", "cpu-32", "--goal", "fastest"}, exitUsage, ""},
		{[]string{"recommend", "--machine", "cpu-32", "--json", "--capability", "vision"}, exitOK, `"enabled": true`},
		{[]string{"recommend", "--machine", "cpu-32", "--json", "--fit-target", "1048576"}, exitError, `"enabled": false`},
		{[]string{"recommend", "--machine", "cpu-32", "--fit-target", "1048576"}, exitError, "do not fit and 0 are incompatible"},
		{[]string{"recommend", "--machine", "cpu-32", "--json", "--goal", "fastest"}, exitUsage, ""},
	} {
		args := append([]string{tc.args[0], "--quiet"}, tc.args[1:]...)
		if tc.args[0] == "recommend" {
			args = tc.args
		}
		code, out, errs := run(t, args...)
		if code != tc.code || !strings.Contains(out, tc.out) {
			t.Errorf("%s: exit %d, want %d; stdout lacks %q?\n%s\n%s", strings.Join(tc.args, " "), code, tc.code, tc.out, out, errs)
		}
		if tc.code != exitOK && !strings.Contains(out, `"enabled": true`) && errs == "" {
			t.Errorf("%s: exit %d with nothing on standard error", strings.Join(tc.args, " "), code)
		}
	}
}
