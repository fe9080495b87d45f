package source

import (
	"context"
	"errors"
	"fmt"
	"github.com/headroom-llm/headroom/internal/atomicfile"
	"io/fs"
	"os"

	"github.com/headroom-llm/headroom/gguf"
)

// checkRegular refuses what is not a regular file before anything opens
// it: opening a FIFO for reading blocks until a writer comes, for ever if
// none does, and a device or socket is no model either.
func checkRegular(p string, fi fs.FileInfo) error {
	if fi.Mode().IsRegular() {
		return nil
	}
	return fmt.Errorf("%s is %s: %w; expected a .gguf file", p, fileKind(fi.Mode()), ErrNotRegular)
}

// ErrNotRegular is wrapped by the error for a model path that names a
// directory, a pipe or a device instead of a file.
var ErrNotRegular = errors.New("not a regular file")

// fileKind names a file's type for errors.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "a special file (" + m.Type().String() + ")"
}

// readLocal parses the header of the local file p, charging budget. The
// file is opened without blocking (see atomicfile.OpenNoBlock) and checked to be a
// regular file through the descriptor itself, so that a FIFO swapped in
// after the caller's Stat is refused too; ctx stops the parse between
// reads.
func readLocal(ctx context.Context, p string, budget *gguf.Budget) (*gguf.File, error) {
	fh, err := atomicfile.OpenNoBlock(p)
	if err != nil {
		return nil, fmt.Errorf("opening model file: %w", err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("opening model file: %w", err)
	}
	if err := checkRegular(p, fi); err != nil {
		return nil, err
	}
	f, err := gguf.ReadWith(fh, fi.Size(), gguf.Options{Budget: budget, Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("reading the GGUF header of %s: %w", p, err)
	}
	return f, nil
}

// statRegular is os.Stat that refuses anything but a regular file.
func statRegular(p string) (fs.FileInfo, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	return fi, checkRegular(p, fi)
}
