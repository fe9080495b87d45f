//go:build !(darwin || dragonfly || freebsd || linux || windows)

package store

import (
	"errors"
	"fmt"
)

// FreeBytes is not available on this system; its error wraps
// errors.ErrUnsupported, which makes Pull skip the space check.
func FreeBytes(dir string) (int64, error) {
	return 0, fmt.Errorf("free space of %s: %w", dir, errors.ErrUnsupported)
}
