//go:build !unix

package atomicfile

import "os"

// openNonBlocking opens for reading; other systems have no FIFOs in the
// file system to block on.
func openNonBlocking(path string) (*os.File, error) { return os.Open(path) }
