package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// --engine names the build the user will run; the output says which
// build the figures are for and what is known to differ, and a value
// that names no build is refused with the forms it takes.
func TestEngineFlag(t *testing.T) {
	path := synthFile(t, "tinyllama-1.1b")
	for _, tt := range []struct {
		engine string
		exact  bool
		says   string
	}{
		{"", true, "figures for llama.cpp de3ff81, the newest build headroom has measured"},
		{"80fb11a", true, "figures for llama.cpp 80fb11a: your build (80fb11a) is one headroom has measured"},
		{"de3ff81", true, "figures for llama.cpp de3ff81: your build (de3ff81) is one headroom has measured"},
		{"b7000", false, "figures for llama.cpp de3ff81, not for your build (b7000), which headroom has not measured"},
	} {
		args := []string{"fit", "--quiet", "--json", path, "-c", "4096", "--machine", "cpu-32"}
		if tt.engine != "" {
			args = append(args, "--engine", tt.engine)
		}
		code, out, errs := run(t, args...)
		if code != 0 {
			t.Fatalf("--engine %q: exit %d: %s", tt.engine, code, errs)
		}
		var f struct {
			Engine struct {
				FiguresFor string `json:"figures_for"`
				Exact      bool   `json:"exact"`
				Says       string `json:"says"`
			} `json:"engine"`
		}
		if err := json.Unmarshal([]byte(out), &f); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(f.Engine.FiguresFor, "llama.cpp ") || f.Engine.Exact != tt.exact || !strings.Contains(f.Engine.Says, tt.says) {
			t.Errorf("--engine %q: %+v", tt.engine, f.Engine)
		}
	}
	code, _, errs := run(t, "fit", "--quiet", path, "--machine", "cpu-32", "--engine", "latest")
	if code != 2 || !strings.Contains(errs, "--engine \"latest\": want a llama-server program, a commit") {
		t.Errorf("--engine latest: exit %d: %s", code, errs)
	}
}
