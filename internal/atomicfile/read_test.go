//go:build unix

package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestReadFileRefuses: a FIFO is refused at once (not waited on), a file
// over the bound is refused before it is read, a regular file is read.
func TestReadFileRefuses(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	start := time.Now()
	if _, err := ReadFile(fifo, 1<<20); !errors.Is(err, ErrNotRegular) {
		t.Errorf("FIFO: %v, want ErrNotRegular", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusing the FIFO took %v", d)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 2048), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(big, 1024); !errors.Is(err, ErrTooLarge) {
		t.Errorf("2048 bytes bound to 1024: %v", err)
	}
	if b, err := ReadFile(big, 4096); err != nil || len(b) != 2048 {
		t.Errorf("read %d bytes, %v", len(b), err)
	}
	if _, err := ReadFile(dir, 4096); err == nil {
		t.Error("a directory was read")
	}
}
