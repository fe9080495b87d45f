package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrNotRegular is wrapped by ReadFile's error for a path that is a
// FIFO, a device, a socket or a directory: a cache file replaced by a
// FIFO would otherwise block its reader for good.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by ReadFile's error for a file over its bound.
var ErrTooLarge = errors.New("larger than its bound")

// ReadFile reads a file headroom keeps (a cache, a store of
// measurements) that anyone who can write the directory could have
// replaced: only a regular file, opened without blocking (a FIFO opened
// for reading would wait for a writer), and only up to max bytes, so a
// huge file costs nothing to refuse.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := OpenNoBlock(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, fi.Mode().Type())
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s: %d bytes, %w of %d", path, fi.Size(), ErrTooLarge, max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: %w of %d bytes (it grew while read)", path, ErrTooLarge, max)
	}
	return b, nil
}

// SetAside renames a damaged file to PATH.damaged, replacing an older
// one, so the next run starts afresh and the user can still look at it.
func SetAside(path string) error {
	return os.Rename(path, path+".damaged")
}
