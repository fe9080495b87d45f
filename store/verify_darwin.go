package store

import (
	"io/fs"
	"syscall"
)

// identity is the device, inode and status-change time of a file.
func identity(fi fs.FileInfo) (dev, ino uint64, ctimeNS int64) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, 0
	}
	return uint64(st.Dev), st.Ino, st.Ctimespec.Nano()
}

// hardLinks is how many names a file has.
func hardLinks(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}
