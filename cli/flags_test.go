package cli

import (
	"regexp"
	"strings"
	"testing"
)

// TestInvalidFlagValues: every refused value names the flag, as spelled
// on the command line, and what it takes; none is quietly replaced.
func TestInvalidFlagValues(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"recommend", "--capability", "coding"}, `--capability "coding": want tools, vision, reasoning, embedding`},
		{[]string{"recommend", "--license", "gpl"}, `--license "gpl": want apache-2.0, `},
		{[]string{"recommend", "--goal", "fast"}, `--goal "fast": want balanced, quality, speed, context`},
		{[]string{"recommend", "-np", "0"}, "-np, --parallel 0: want 1 to 256 slots"},
		{[]string{"recommend", "--min-ctx", "100"}, "--min-ctx 100: want 256 or more"},
		{[]string{"plan", "x.gguf", "-np", "-3"}, "-np, --parallel -3: want 1 to 256 slots"},
		{[]string{"plan", "x.gguf", "--goal", "fast"}, `--goal "fast": want balanced, speed or context`},
		{[]string{"plan", "x.gguf", "-ctk", "q7"}, `-ctk, --cache-type-k "q7": want one of f32, f16`},
		{[]string{"plan", "x.gguf", "-np", "x"}, `-np, --parallel "x": not a whole number`},
		{[]string{"plan", "x.gguf", "--fit-target", "-1"}, "--fit-target -1: want 0 or more MiB"},
		{[]string{"plan", "x.gguf", "--bogus"}, "unknown flag -bogus"},
		{[]string{"fit", "x.gguf", "-np", "-3"}, "-np, --parallel -3: want -1 (llama-server's auto) or 1 to 256 slots"},
		{[]string{"fit", "x.gguf", "-np", "0"}, "-np, --parallel 0: want -1"},
		{[]string{"fit", "x.gguf", "-fa", "maybe"}, `-fa, --flash-attn "maybe": want on, off or auto`},
		{[]string{"fit", "x.gguf", "-ub", "0"}, "-ub, --ubatch-size 0: want 1 or more"},
		{[]string{"fit", "x.gguf", "-ngl", "many"}, `-ngl, --gpu-layers, --n-gpu-layers "many": want a number of layers, auto or all`},
		{[]string{"fit", "x.gguf", "-ncmoe", "-1"}, "-ncmoe, --n-cpu-moe -1: want 0 or more layers"},
		{[]string{"hw", "--remeasure"}, "--remeasure measures this machine; --machine cpu-32 is described"},
		{[]string{"recommend", "--remeasure"}, "--remeasure measures this machine; --machine cpu-32 is described"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, _, errs := run(t, append(tt.args, "--machine", "cpu-32")...)
			if code != exitUsage || !strings.Contains(errs, tt.want) {
				t.Errorf("exit %d, want %d; stderr %q lacks %q", code, exitUsage, errs, tt.want)
			}
		})
	}
}

// TestFlagNeedsValue: a flag given last with no value says what it takes.
func TestFlagNeedsValue(t *testing.T) {
	code, _, errs := run(t, "plan", "x.gguf", "-c")
	if want := "-c, --ctx-size needs a value: a whole number"; code != exitUsage || !strings.Contains(errs, want) {
		t.Errorf("exit %d; stderr %q lacks %q", code, errs, want)
	}
}

// TestHelpOneEntryPerFlag: a flag's spellings share one entry, and its
// default is said at most once.
func TestHelpOneEntryPerFlag(t *testing.T) {
	for _, cmd := range []string{"fit", "plan", "recommend", "pull", "serve", "hw", "inspect"} {
		t.Run(cmd, func(t *testing.T) {
			code, out, errs := run(t, cmd, "--help")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			_, flags, _ := strings.Cut(out, "\nFlags:\n")
			seen := map[string]bool{}
			name := regexp.MustCompile(`-+([a-z][a-z0-9-]*)`)
			for _, line := range strings.Split(flags, "\n") {
				if strings.HasPrefix(line, "  -") {
					for _, m := range name.FindAllStringSubmatch(strings.Fields(line)[0]+" "+line, -1) {
						if seen[m[1]] && !strings.HasPrefix(line, "      ") {
							t.Errorf("%s: --%s has more than one entry", cmd, m[1])
						}
					}
					for _, m := range name.FindAllStringSubmatch(line, -1) {
						seen[m[1]] = true
					}
				}
				if strings.Count(strings.ToLower(line), "default") > 1 {
					t.Errorf("%s: default said twice: %s", cmd, line)
				}
			}
			if cmd == "fit" && !strings.Contains(flags, "  -c, --ctx-size N\n") {
				t.Errorf("fit: no entry -c, --ctx-size N:\n%s", flags)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, out, errs := run(t, args...)
		if code != 0 || !strings.HasPrefix(out, "headroom ") || !strings.Contains(out, "go1.") {
			t.Errorf("%v: exit %d, %q %q", args, code, out, errs)
		}
	}
}
