//go:build unix

package atomicfile

import (
	"os"
	"syscall"
)

// openNonBlocking opens for reading without waiting for a FIFO's writer.
func openNonBlocking(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
