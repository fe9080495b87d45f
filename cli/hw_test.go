package cli

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateHW = flag.Bool("update-hw", false, "rewrite the hw command's golden files under testdata")

func TestHWPresetTable(t *testing.T) {
	for _, preset := range []string{"2x-rtx-3090", "m4-max-128"} {
		t.Run(preset, func(t *testing.T) {
			code, out, errs := run(t, "hw", "--machine", preset)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			golden := filepath.Join("testdata", "hw-"+preset+".golden")
			if *updateHW {
				os.MkdirAll("testdata", 0o755)
				os.WriteFile(golden, []byte(out), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update-hw to create it)", err)
			}
			if out != string(want) {
				t.Errorf("output differs from %s (run with -update-hw and read the diff):\n%s", golden, out)
			}
		})
	}
}

// TestHWJSONRoundTrip saves a snapshot with --json and plans against it
// with --machine FILE, as a user moving a snapshot between machines would.
func TestHWJSONRoundTrip(t *testing.T) {
	code, saved, errs := run(t, "hw", "--machine", "M4-Max-128", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	file := filepath.Join(t.TempDir(), "mac.json")
	if err := os.WriteFile(file, []byte(saved), 0o644); err != nil {
		t.Fatal(err)
	}
	code, again, errs := run(t, "hw", "--machine", file, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	cut := func(s string) string { return s[strings.Index(s, `"domains"`):strings.Index(s, `"notes"`)] }
	if cut(again) != cut(saved) {
		t.Errorf("domains and devices changed on the way through a file:\n%s\nvs\n%s", saved, again)
	}
	if !strings.Contains(again, `"source": "file"`) || !strings.Contains(again, "saved from preset m4-max-128") {
		t.Errorf("a loaded file should say so:\n%s", again)
	}
}

func TestHWProbe(t *testing.T) {
	code, out, errs := run(t, "hw", "--llama-server", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"(probe, ", "DOMAIN", "capacity", "CPU", "sources"} {
		if !strings.Contains(strings.ToLower(out), strings.ToLower(want)) {
			t.Errorf("probe output lacks %q:\n%s", want, out)
		}
	}
}

func TestHWUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string // in stdout
		err  string // in stderr
	}{
		{[]string{"help"}, 0, "hw", ""},
		{[]string{"hw", "--help"}, 0, "--presets", ""},
		{[]string{"help", "hw"}, 0, "running headless", ""},
		{[]string{"hw", "--presets"}, 0, "strix-halo-128", ""},
		{[]string{"hw", "rtx-4090"}, 2, "", `takes no arguments, got "rtx-4090" (a preset or file goes after --machine)`},
		{[]string{"hw", "--machine", "rtx-9090"}, 1, "", `"rtx-9090" is neither a preset`},
		{[]string{"hw", "--machine"}, 2, "", "--machine needs a value"},
	}
	for _, tc := range tests {
		code, out, errs := run(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errs, tc.err) {
			t.Errorf("%v: exit %d\nstdout: %s\nstderr: %s", tc.args, code, out, errs)
		}
	}
}

func TestHWJoinAndPlanOverRPC(t *testing.T) {
	remote := filepath.Join(t.TempDir(), "gpu-box.json")
	code, out, errs := run(t, "hw", "--machine", "2x-rtx-3090", "--json")
	if code != 0 {
		t.Fatal(errs)
	}
	if err := os.WriteFile(remote, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs = run(t, "hw", "--machine", "rtx-4090", "--rpc", "10.0.0.2:50052="+remote, "--json")
	if code != 0 {
		t.Fatalf("hw --rpc: exit %d: %s", code, errs)
	}
	joined := filepath.Join(t.TempDir(), "joined.json")
	if err := os.WriteFile(joined, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs = run(t, "plan", "--quiet", "--print-args", "--machine", joined, synthFile(t, "llama-3.1-70b"))
	if code != 0 || !strings.Contains(out, "--rpc 10.0.0.2:50052 -ts ") || !strings.Contains(out, "-ngl 81") {
		t.Errorf("plan over the joined machine: exit %d, %q %s", code, out, errs)
	}
	// Without a file the rpc-server is asked itself; nothing listens on
	// this loopback port, which the error says.
	if code, _, errs := run(t, "hw", "--rpc", "127.0.0.1:1"); code != 1 || !strings.Contains(errs, "rpc-server 127.0.0.1:1: connecting") {
		t.Errorf("--rpc without a file, no server: exit %d %s", code, errs)
	}
	if code, _, errs := run(t, "hw", "--rpc", "10.0.0.2:50052="); code != 2 || !strings.Contains(errs, "HOST:PORT=FILE") {
		t.Errorf("--rpc with an empty file: exit %d %s", code, errs)
	}
}
