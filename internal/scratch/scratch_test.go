//go:build unix

package scratch

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestSweepRemovesTheDeads: a directory left by a process that is gone
// is removed, one of a process that runs (this one) and one of another
// name are not.
func TestSweepRemovesTheDeads(t *testing.T) {
	tmp := t.TempDir()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("no true(1): %v", err)
	}
	dead := cmd.Process.Pid // reaped: gone
	left := filepath.Join(tmp, "headroom-bench-"+strconv.Itoa(dead)+"-123")
	mine := filepath.Join(tmp, "headroom-bench-"+strconv.Itoa(os.Getpid())+"-456")
	other := filepath.Join(tmp, "headroom-bench-notapid")
	for _, d := range []string{left, mine, other} {
		if err := os.MkdirAll(filepath.Join(d, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if n := sweep(tmp, "headroom-bench-"); n != 1 {
		t.Errorf("removed %d, want 1", n)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("the dead process's directory is still there: %v", err)
	}
	for _, d := range []string{mine, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
}
