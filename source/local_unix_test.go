//go:build unix

package source

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/internal/ggufattack"
)

// TestFIFOIsRefused: a FIFO given as the model, or as one shard of a
// split model, blocked inspect for ever (opening it waits for a writer),
// and in serve-api two such requests held both header-read slots for good
// (issue #30, item 4). Such a file is refused, naming it, before it is
// opened; the bound is 2 s, the check takes microseconds.
func TestFIFOIsRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.gguf")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	writeAttack(t, filepath.Join(dir, gguf.ShardName("s", 1, 2)), ggufattack.SplitShard(0, 2, 0))
	shard := filepath.Join(dir, gguf.ShardName("s", 2, 2))
	if err := syscall.Mkfifo(shard, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, ref, want string }{
		{"model", fifo, fifo + " is a named pipe (FIFO): not a regular file"},
		{"shard", filepath.Join(dir, gguf.ShardName("s", 1, 2)), "shard 2: " + shard + " is a named pipe (FIFO): not a regular file"},
		{"directory", dir, dir + " is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := plainClient(t)
			done := make(chan error, 1)
			start := time.Now()
			go func() {
				_, err := c.Open(context.Background(), tc.ref)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("Open: %v; want an error containing %q", err, tc.want)
				}
				t.Logf("refused in %v: %v", time.Since(start), err)
			case <-time.After(2 * time.Second):
				t.Fatal("Open still blocked after 2 s")
			}
		})
	}
}

// TestFIFOSwappedInIsRefused: a FIFO that replaces the file between the
// check and the open is opened without blocking and refused by the
// descriptor's own type.
func TestFIFOSwappedInIsRefused(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "model.gguf")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := readLocal(context.Background(), fifo, gguf.NewBudget(1<<20))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "named pipe") {
			t.Errorf("readLocal: %v; want the FIFO refused", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("readLocal still blocked after 2 s")
	}
}
