package cli

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/llamaflags"
)

// helpNames are the flag names a command's --help lists, without dashes.
func helpNames(t *testing.T, cmd string) []string {
	t.Helper()
	code, out, errs := run(t, cmd, "--help")
	if code != 0 {
		t.Fatalf("%s --help: exit %d: %s", cmd, code, errs)
	}
	var names []string
	re := regexp.MustCompile(`^  (-[^ ,]+(?:, -[^ ,]+)*)`)
	for _, line := range strings.Split(out, "\n") {
		m := re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, n := range strings.Split(m[1], ", ") {
			names = append(names, strings.TrimLeft(n, "-"))
		}
	}
	return names
}

// TestModeledFlagsEverywhere: every modeled flag of every held build's
// table is taken, under each of its spellings, by every command that
// plans or checks a load, so a flag means the same in each. The few a
// command does not take are listed here with the reason its error gives.
func TestModeledFlagsEverywhere(t *testing.T) {
	// Not taken, and why (each command's error says so).
	missing := map[string][]string{
		// The projector and draft are fit's and plan's (a catalog
		// entry's projector is pulled and served by its entry).
		"pull":      {"mmproj", "mmproj-offload", "spec-draft-model", "spec-draft-ngl", "rpc"},
		"serve":     {"mmproj", "mmproj-offload", "spec-draft-model", "spec-draft-ngl"},
		"serve-api": {"mmproj", "mmproj-offload", "spec-draft-model", "spec-draft-ngl", "rpc"},
		// Joining rpc-servers is serve's: fit and plan read a joined
		// machine from 'headroom hw --rpc ... --json' (--machine).
		"fit":  {"rpc"},
		"plan": {"rpc"},
	}
	for _, b := range llamaflags.Builds() {
		tb, err := llamaflags.Load(b)
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{"fit", "plan", "pull", "serve", "serve-api"} {
			names := helpNames(t, cmd)
			for _, e := range tb.Entries() {
				if e.Use != llamaflags.Modeled || slices.Contains(missing[cmd], strings.TrimLeft(e.Key(), "-")) {
					continue
				}
				for _, n := range e.Names {
					if !slices.Contains(names, strings.TrimLeft(n, "-")) {
						t.Errorf("build %s: headroom %s does not take %s (%s)", b, cmd, n, strings.Join(e.Names, ", "))
					}
				}
			}
		}
	}
}
