package conformance_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/conformance"
)

// TestServerCommands checks that every llama-server golden ran with exactly
// the flags headroom emits for its profile: the harness builds the command
// in JavaScript (harness/serve.mjs), and a drift between the two would
// make the goldens measure something headroom never plans.
func TestServerCommands(t *testing.T) {
	dirs := []string{filepath.Join("testdata", "server"), filepath.Join("testdata", "server-de3ff81"), filepath.Join("testdata", "server-cuda")}
	if d := os.Getenv("HEADROOM_GOLDEN_DIR"); d != "" {
		dirs = []string{d}
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			if !hasRecords(dir) {
				t.Skipf("no records in %s (conformance/gpu measures them)", dir)
			}
			checkServerCommands(t, dir)
		})
	}
}

// checkServerCommands holds the commands of the server cases in dir to
// what headroom emits for their profiles, with their build's rules.
func checkServerCommands(t *testing.T, dir string) {
	cases, err := conformance.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range cases {
		c := &cases[i]
		if !c.Server() {
			continue
		}
		n++
		p := profileOf(c)
		got := p.Args()
		if eps := c.RPCEndpoints(); len(eps) > 0 {
			// headroom's --rpc names the servers; the harness started
			// them on free ports, which the command records.
			got = append(got, "--rpc", strings.Join(eps, ","))
		}
		if !slices.Equal(got, c.Inputs.Command) {
			t.Errorf("%s: llama-server ran with %q, headroom emits %q for this profile", c.ID, c.Inputs.Command, got)
		}
		// The engine's n_outputs_max is headroom's rule for llama-server.
		if want := p.ServerOutputsMax(c.Figures.Context.NBatch); c.Figures.Context.NOutputsMax != want {
			t.Errorf("%s: llama-server's n_outputs_max is %d, headroom's rule gives %d", c.ID, c.Figures.Context.NOutputsMax, want)
		}
	}
	if n == 0 && dir == filepath.Join("testdata", "server") {
		t.Fatal("no llama-server golden cases")
	}
}
