// Package atomicfile writes a file whole or not at all: through a
// temporary file in the same directory and a rename, so that a reader,
// another headroom process among them, sees the old file or the new one,
// never part of one. It also reads such files back as files anyone who
// can write the directory may have replaced: without blocking on a FIFO
// (OpenNoBlock), regular files only, within a bound (ReadFile).
package atomicfile

import (
	"os"
	"path/filepath"
)

// WriteFile writes data to path, creating its directory. A failure
// leaves no temporary file behind.
func WriteFile(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
