//go:build !unix

package source

import "os"

// openNoBlock opens p for reading; outside Unix there are no FIFOs to
// block on in the file system.
func openNoBlock(p string) (*os.File, error) { return os.Open(p) }
