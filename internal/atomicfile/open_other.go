//go:build !unix

package atomicfile

import "os"

// OpenNoBlock opens path for reading; outside Unix there are no FIFOs in
// the file system to block on.
func OpenNoBlock(path string) (*os.File, error) { return os.Open(path) }
