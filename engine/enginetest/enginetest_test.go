package enginetest

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestBuildFake builds the stand-in (or finds it cached), and checks that a
// second call reuses it and that it answers like llama-server.
func TestBuildFake(t *testing.T) {
	first := BuildFake(t)
	if again := BuildFake(t); again != first {
		t.Errorf("second BuildFake = %q, want the cached %q", again, first)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, first, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "version: 6789 (abc1234)") {
		t.Errorf("%s --version: %v\n%s", first, err, out)
	}
}
