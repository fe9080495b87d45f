//go:build unix

package cli

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/internal/ggufattack"
)

// inspectChild starts this test binary as headroom inspect with args,
// stdout counted and discarded.
func inspectChild(t *testing.T, args ...string) (*exec.Cmd, *atomic.Int64, *bytes.Buffer) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--", "inspect"}, args...)...)
	cmd.Env = append(os.Environ(), "HEADROOM_CLI_CHILD=1", "XDG_CACHE_HOME="+filepath.Join(dir, "cache"), "HF_HUB_OFFLINE=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	var n atomic.Int64
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 1<<20)
		for {
			k, err := stdout.Read(buf)
			n.Add(int64(k))
			if err != nil {
				io.Copy(io.Discard, stdout)
				return
			}
		}
	}()
	return cmd, &n, &stderr
}

// waitExit waits up to limit for cmd to exit.
func waitExit(t *testing.T, cmd *exec.Cmd, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still running %v later", limit)
		return nil
	}
}

// TestInspectStopsOnSIGINT: inspect --json --full of a 250 MiB uint8
// array printed nothing for 88 s and ignored SIGINT, and a FIFO given as
// the model blocked inspect for good, SIGINT and SIGTERM ignored (issue
// #30, items 3 and 4). The output now starts at once and SIGINT stops it
// within 2 s; the FIFO is refused at once.
func TestInspectStopsOnSIGINT(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 250 MiB sparse file and parses it")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "bytes.gguf")
	g := ggufattack.BigBytes()
	if err := os.WriteFile(path, g.Prefix, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, g.Size); err != nil {
		t.Fatal(err)
	}
	cmd, printed, stderr := inspectChild(t, "--json", "--full", "--quiet", path)
	deadline := time.Now().Add(30 * time.Second)
	for printed.Load() < 1<<20 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if printed.Load() < 1<<20 {
		cmd.Process.Kill()
		t.Fatalf("printed %d bytes in 30 s; want output from the start\n%s", printed.Load(), stderr)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := waitExit(t, cmd, 2*time.Second)
	t.Logf("SIGINT after %d bytes: exited in %v (%v): %s", printed.Load(), time.Since(start).Round(time.Millisecond), err, bytes.TrimSpace(stderr.Bytes()))
	if err == nil {
		t.Error("exit status 0 after SIGINT cut the output short")
	}

	fifo := filepath.Join(dir, "fifo.gguf")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	cmd, _, stderr = inspectChild(t, "--quiet", fifo)
	if err := waitExit(t, cmd, 2*time.Second); err == nil {
		t.Error("inspect of a FIFO exited 0")
	}
	if !bytes.Contains(stderr.Bytes(), []byte("named pipe")) {
		t.Errorf("stderr %q does not say the file is a named pipe", stderr)
	}
}
