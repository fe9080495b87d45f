package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/plan"
)

// TestCatalogNames: plan, fit and inspect take ENTRY/QUANT as pull, serve
// and the API do.
func TestCatalogNames(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string // in stdout, or stderr when code is not 0
	}{
		{"plan", []string{"plan", "qwen3-8b/Q4_K_M", "--machine", "cpu-32"}, 0, "llama-server -hf unsloth/Qwen3-8B-GGUF:Q4_K_M -c "},
		{"plan json", []string{"plan", "qwen3-8b/Q4_K_M", "--machine", "cpu-32", "--json"}, 0, `"inputs": "derived"`},
		{"fit", []string{"fit", "qwen3-8b/Q4_K_M", "--machine", "rtx-4090", "-c", "8192"}, 0, "verdict  fits"},
		{"fit json", []string{"fit", "qwen3-8b/q4_k_m", "--machine", "rtx-4090", "--json"}, 0, `"verdict": "fits"`},
		{"unknown quant", []string{"plan", "qwen3-8b/Q9_K", "--machine", "cpu-32"}, 1, "the catalog has no Q9_K variant of qwen3-8b (did you mean qwen3-8b/Q6_K? it has Q4_K_M"},
		// Offline with an empty cache, inspect reads the header fit and
		// plan read (TestInspectCatalogOffline).
		{"inspect", []string{"inspect", "qwen3-8b/Q4_K_M"}, 0, "Qwen3-8B"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runEnv(t, map[string]string{"HF_HUB_OFFLINE": "1"}, tt.args...)
			got := out
			if tt.code != 0 {
				got = errs
			}
			if code != tt.code || !strings.Contains(got, tt.want) {
				t.Errorf("exit %d, want %d; output lacks %q:\n%s%s", code, tt.code, tt.want, out, errs)
			}
		})
	}
}

// TestPlanJSONWhenNothingFits: --json prints a verdict and why, whatever
// the verdict, and the exit status still says it failed.
func TestPlanJSONWhenNothingFits(t *testing.T) {
	code, out, _ := run(t, "plan", "qwen3-235b-a22b/Q8_0", "--machine", "cpu-32", "--json")
	var got struct {
		Verdict string          `json:"verdict"`
		Reason  string          `json:"reason"`
		Chosen  json.RawMessage `json:"chosen"`
		Explain []string        `json:"explain"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON (%v):\n%s", err, out)
	}
	if code != exitError || got.Verdict != plan.DoesNotFit || !strings.Contains(got.Reason, "nothing fits") || string(got.Chosen) != "null" || len(got.Explain) == 0 {
		t.Errorf("exit %d, verdict %q, reason %q, chosen %s", code, got.Verdict, got.Reason, got.Chosen)
	}
}

// TestInspectQuantTag: the quant tag is the header's file type, not the
// last word of the file's name.
func TestInspectQuantTag(t *testing.T) {
	src := synthFile(t, "qwen3-0.6b") // Q4_K_M
	named := filepath.Join(t.TempDir(), "Qwen3-30B-A3B.gguf")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(named, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, "inspect", named, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got struct {
		Artifact struct {
			QuantTag string `json:"quant_tag"`
		} `json:"artifact"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Artifact.QuantTag != "Q4_K_M" {
		t.Errorf("quant_tag %q, want Q4_K_M from general.file_type", got.Artifact.QuantTag)
	}
}
