package cli

import (
	"runtime/debug"
	"testing"
)

// TestVersionOf: the version line names the revision wherever the build
// recorded one, in its VCS settings or in a pseudo-version as go install
// gives it, and says so where none was recorded (-buildvcs=false).
func TestVersionOf(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "118c2df44843dd6eb0efa956a98535962400f565"},
		{Key: "vcs.time", Value: "2026-12-02T14:39:28Z"}, {Key: "vcs.modified", Value: "true"}}
	for _, tt := range []struct {
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		{"(devel)", vcs, "(devel), revision 118c2df44843dd6eb0efa956a98535962400f565 with uncommitted changes, committed 2026-12-02T14:39:28Z, go1.26.8"},
		{"", nil, "(devel), revision unknown (built without VCS information), go1.26.8"},
		{"(devel)", []debug.BuildSetting{{Key: "-buildvcs", Value: "false"}}, "(devel), revision unknown (built without VCS information), go1.26.8"},
		{"v0.0.0-20261202143928-118c2df44843", nil, "v0.0.0-20261202143928-118c2df44843, revision 118c2df44843, go1.26.8"},
		{"v0.3.1-0.20261202143928-118c2df44843", nil, "v0.3.1-0.20261202143928-118c2df44843, revision 118c2df44843, go1.26.8"},
		{"v0.3.0", nil, "v0.3.0, go1.26.8"},
	} {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/headroom-llm/headroom", Version: tt.version}, Settings: tt.settings}
		if got := versionOf(bi); got != tt.want {
			t.Errorf("%q %v:\n got %s\nwant %s", tt.version, tt.settings, got, tt.want)
		}
	}
}
