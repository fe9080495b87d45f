//go:build unix

package store

import (
	"errors"
	"io/fs"
	"syscall"
)

// readOnly says how the store cannot be written, from the error of a
// write: "read-only" for a read-only filesystem, "not writable by this
// user" for a permission error, "" for anything else.
func readOnly(err error) string {
	switch {
	case errors.Is(err, syscall.EROFS):
		return "read-only"
	case errors.Is(err, fs.ErrPermission):
		return "not writable by this user"
	}
	return ""
}
