//go:build unix

package gguf

import (
	"os"
	"syscall"
)

// diskUsage returns the bytes a file occupies on disk, or -1 if unknown.
func diskUsage(st os.FileInfo) int64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Blocks * 512
	}
	return -1
}
