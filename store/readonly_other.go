//go:build !unix

package store

import (
	"errors"
	"io/fs"
)

// readOnly says how the store cannot be written, from the error of a
// write: "not writable by this user" for a permission error, "" for
// anything else.
func readOnly(err error) string {
	if errors.Is(err, fs.ErrPermission) {
		return "not writable by this user"
	}
	return ""
}
