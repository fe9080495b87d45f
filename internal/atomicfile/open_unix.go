//go:build unix

package atomicfile

import (
	"os"
	"syscall"
)

// OpenNoBlock opens path for reading with O_NONBLOCK, which makes opening
// a FIFO return at once instead of waiting for a writer; on a regular
// file the flag changes nothing. Callers check the descriptor's type.
func OpenNoBlock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
