package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/synth"
)

// widthMachines are the presets the width test plans on: a GPU, unified
// memory, a machine without a GPU and two GPUs.
var widthMachines = []string{"rtx-4090", "m4-max-64", "cpu-32", "2x-rtx-3090"}

// overWide lists the lines of out wider than textWidth, counted in runes.
func overWide(out string) []string {
	var wide []string
	for i, line := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(line); n > textWidth {
			wide = append(wide, fmt.Sprintf("line %d, %d columns: %s", i+1, n, line))
		}
	}
	return wide
}

func TestOverWide(t *testing.T) {
	ok := strings.Repeat("é", textWidth) // 200 bytes, 100 columns
	if w := overWide("a\n" + ok + "\n"); len(w) != 0 {
		t.Errorf("%d runes counted as too wide: %v", textWidth, w)
	}
	if w := overWide("a\n" + ok + "x\n"); len(w) != 1 || !strings.HasPrefix(w[0], "line 2, 101 columns") {
		t.Errorf("101 runes: %v", w)
	}
}

// TestFitPlanWidth runs fit and plan on every synthetic shape the plan
// goldens use, on each preset, and fails on any line over 100 columns.
func TestFitPlanWidth(t *testing.T) {
	if testing.Short() {
		t.Skip("plans every shape on four machines")
	}
	dir := t.TempDir()
	dump := os.Getenv("HEADROOM_WIDTH_DUMP")
	for _, shape := range synth.Names() {
		s, _ := synth.Lookup(shape)
		b, err := synth.Build(s, synth.Q4_K_M)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, shape+".gguf")
		if err := b.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		for _, m := range widthMachines {
			for _, args := range [][]string{
				{"fit", "--quiet", path, "--machine", m, "-c", "8192"},
				{"fit", "--quiet", path, "--machine", m, "-c", "131072", "-np", "1", "-ngl", "all"},
				{"plan", "--quiet", path, "--machine", m},
			} {
				code, out, errs := run(t, args...)
				if code == exitUsage {
					t.Errorf("%s: exit %d: %s", strings.Join(args, " "), code, errs)
				}
				if dump != "" {
					fmt.Fprintf(os.Stderr, "=== %s %s %s (exit %d)\n%s%s", args[0], shape, m, code, out, errs)
				}
				for _, w := range overWide(out) {
					t.Errorf("%s %s --machine %s: %s", args[0], shape, m, w)
				}
			}
		}
	}
}

// TestRecommendWidth lists the whole catalog on each preset, by default
// and with --all, and fails on any line over 100 columns; the default
// listing must also name its order and the two sizes.
func TestRecommendWidth(t *testing.T) {
	if testing.Short() {
		t.Skip("plans the catalog on four machines")
	}
	for _, m := range widthMachines {
		// One home for both runs: the second reads the first's plans.
		home := t.TempDir()
		vars := map[string]string{"XDG_CACHE_HOME": filepath.Join(home, "cache")}
		for _, args := range [][]string{{"recommend", "--machine", m, "--all"}, {"recommend", "--machine", m}} {
			code, out, errs := runEnv(t, vars, args...)
			if code != exitOK {
				t.Fatalf("%s: exit %d: %s", strings.Join(args, " "), code, errs)
			}
			if os.Getenv("HEADROOM_WIDTH_DUMP") != "" {
				fmt.Fprintf(os.Stderr, "=== %s\n%s", strings.Join(args, " "), out)
			}
			for _, w := range overWide(out) {
				t.Errorf("%s: %s", strings.Join(args, " "), w)
			}
			for _, want := range []string{"order: ", "memory  download", "memory: GiB the plan needs"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s: no %q in\n%s", strings.Join(args, " "), want, out)
				}
			}
			// A column of GPU layers says nothing without a GPU of
			// the machine's own: none, or unified memory.
			own := m == "rtx-4090" || m == "2x-rtx-3090"
			if gpu := strings.Contains(out, "gpu layers"); gpu != own {
				t.Errorf("%s: gpu layers column shown %v on a machine with a GPU of its own %v", strings.Join(args, " "), gpu, own)
			}
		}
	}
}

// TestCatalogWidth runs fit and plan on every catalog variant, planned
// offline from its derived header as recommend plans it, on a GPU and on
// a machine without one, and fails on any line over 100 columns, on
// standard output or error: the llama-server command included, whose
// continuations must keep it within the width as they do every other
// line. Every variant, not a sample: the 732 runs took 17 s here.
func TestCatalogWidth(t *testing.T) {
	if testing.Short() {
		t.Skip("fits and plans every catalog variant on two machines")
	}
	cat, err := catalog.Load()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range cat.Entries {
		for _, v := range e.Variants {
			ref := e.ID + "/" + v.Quant
			for _, m := range []string{"cpu-32", "rtx-4090"} {
				for _, cmd := range []string{"fit", "plan"} {
					code, out, errs := run(t, cmd, "--quiet", ref, "--machine", m)
					n++
					if code == exitUsage || out == "" && !strings.HasPrefix(errs, "headroom "+cmd+": nothing fits") {
						t.Errorf("%s %s --machine %s: exit %d: %s", cmd, ref, m, code, errs)
					}
					for _, w := range append(overWide(out), overWide(errs)...) {
						t.Errorf("%s %s --machine %s: %s", cmd, ref, m, w)
					}
					// fit's verdict names the variant, not its quant alone.
					if first, _, _ := strings.Cut(out, "\n"); cmd == "fit" && strings.Contains(first, " needs ") && !strings.Contains(first, ": "+ref+" needs") {
						t.Errorf("fit %s --machine %s: the verdict does not name the variant: %s", ref, m, first)
					}
				}
			}
		}
	}
	t.Logf("%d runs", n)
}

// TestHelpWidth holds every command's help, and the side outputs that
// list things (synth --list, hw of every preset, hw --presets), to 100
// columns, stdout and stderr both.
func TestHelpWidth(t *testing.T) {
	runs := [][]string{{"help"}, {"synth", "--list"}, {"hw", "--presets"}}
	for _, c := range commands() {
		runs = append(runs, []string{c.name, "--help"})
	}
	for _, m := range widthMachines {
		runs = append(runs, []string{"hw", "--machine", m})
	}
	for _, args := range runs {
		code, out, errs := run(t, args...)
		if code != 0 {
			t.Errorf("%s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
		for _, w := range append(overWide(out), overWide(errs)...) {
			t.Errorf("%s: %s", strings.Join(args, " "), w)
		}
	}
}
