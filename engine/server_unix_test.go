//go:build unix

package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gone reports whether pid no longer runs: it does not exist, or it is a
// zombie waiting for a reaper that is not us (a reparented grandchild).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false // no /proc: the kill above is all we can know
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// TestStopEscalates stops a server that ignores SIGTERM: Stop must SIGKILL
// it after the grace, reap it, and take its process group (a helper child
// it started) with it.
func TestStopEscalates(t *testing.T) {
	t.Parallel()
	childPID := filepath.Join(t.TempDir(), "child.pid")
	const grace = 400 * time.Millisecond
	s := startFake(t, Options{Grace: grace}, "slow-exit", "FAKE_LLAMA_CHILD="+childPID)
	if err := s.WaitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(childPID)
	if err != nil {
		t.Fatal(err)
	}
	grandchild, err := strconv.Atoi(string(data))
	if err != nil {
		t.Fatal(err)
	}
	pid := s.PID()

	start := time.Now()
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if took < grace || took > grace+3*time.Second {
		t.Errorf("Stop took %s, want the grace (%s) and then a prompt SIGKILL", took, grace)
	}
	// Reaped: a zombie would still answer signal 0.
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("pid %d after Stop: kill(0) = %v, want ESRCH (exited and reaped)", pid, err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for !gone(grandchild) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !gone(grandchild) {
		_ = syscall.Kill(grandchild, syscall.SIGKILL)
		t.Errorf("the child's own child (pid %d) survived Stop: the process group was not signalled", grandchild)
	}
	// Idempotent, and quick the second time.
	start = time.Now()
	if err := s.Stop(context.Background()); err != nil || time.Since(start) > 100*time.Millisecond {
		t.Errorf("second Stop: %v after %s, want nil at once", err, time.Since(start))
	}
	if err := s.Wait(); err != nil {
		t.Errorf("Wait after Stop: %v, want nil", err)
	}
}

// TestStopGivesUpWithContext: a Stop whose context ends before the grace
// returns the context's error, and the child is still killed afterwards.
func TestStopGivesUpWithContext(t *testing.T) {
	t.Parallel()
	s := startFake(t, Options{Grace: 500 * time.Millisecond}, "slow-exit")
	if err := s.WaitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop with a short context: %v, want DeadlineExceeded", err)
	}
	select {
	case <-s.Exited():
	case <-time.After(5 * time.Second):
		t.Fatal("the child was not killed after the Stop that gave up")
	}
}
