//go:build darwin || dragonfly || freebsd || linux

package store

import (
	"fmt"
	"syscall"
)

// FreeBytes returns the bytes available to an unprivileged user on the
// filesystem holding dir.
func FreeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
