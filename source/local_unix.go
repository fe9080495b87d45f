//go:build unix

package source

import (
	"os"
	"syscall"
)

// openNoBlock opens p for reading with O_NONBLOCK, which makes opening a
// FIFO return at once instead of waiting for a writer; on a regular file
// the flag changes nothing.
func openNoBlock(p string) (*os.File, error) {
	return os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
