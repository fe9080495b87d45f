package plan

import (
	"testing"

	"github.com/headroom-llm/headroom/builds"
)

// measuredRules are the rules of a build headroom measured, changed by
// each edit: the tests of an older rule take a measured build's and turn
// that one rule back.
func measuredRules(t testing.TB, commit string, edits ...func(*builds.Rules)) builds.Rules {
	t.Helper()
	b, ok := builds.Identify(commit)
	if !ok {
		t.Fatalf("no measured build %s", commit)
	}
	r := b.Rules
	for _, e := range edits {
		e(&r)
	}
	return r
}

// A profile without rules follows the default build's; one with rules,
// its own.
func TestProfileRules(t *testing.T) {
	if got := Defaults().rules(); got != builds.Default() {
		t.Errorf("nil rules: %+v, want the default build's", got)
	}
	old := measuredRules(t, "80fb11a")
	p := Defaults()
	p.Rules = &old
	if got := p.withRules().rules(); got != old {
		t.Errorf("explicit rules: %+v", got)
	}
}
