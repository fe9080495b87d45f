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
		{"b7000", false, "figures for your build (b7000) under the rules its build number implies; headroom has not measured this build, so they are estimates"},
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

// A GPU backend with no measured load is said to be an estimate, in the
// text and in --json; a CPU-only machine has no such note.
func TestUnmeasuredBackendSaid(t *testing.T) {
	path := synthFile(t, "tinyllama-1.1b")
	code, out, errs := run(t, "fit", "--quiet", path, "-c", "4096", "--machine", "rtx-4090")
	if code != 0 || !strings.Contains(out, "backend  CUDA (CUDA0): no CUDA load is among headroom's measured cases") {
		t.Errorf("fit on rtx-4090: exit %d\n%s%s", code, out, errs)
	}
	for _, tt := range []struct {
		machine string
		want    []string
	}{{"rtx-4090", []string{"CUDA"}}, {"cpu-32", nil}} {
		code, out, errs := run(t, "fit", "--quiet", "--json", path, "-c", "4096", "--machine", tt.machine)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tt.machine, code, errs)
		}
		var f struct {
			Backends []struct {
				Backend  string `json:"backend"`
				Measured bool   `json:"measured"`
			} `json:"backends"`
		}
		if err := json.Unmarshal([]byte(out), &f); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, b := range f.Backends {
			if !b.Measured {
				got = append(got, b.Backend)
			}
		}
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%s: unmeasured backends %v, want %v\n%s", tt.machine, got, tt.want, out)
		}
	}
}
