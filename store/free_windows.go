//go:build windows

package store

import (
	"fmt"
	"syscall"
	"unsafe"
)

// FreeBytes returns the bytes available to the current user on the volume
// holding dir.
func FreeBytes(dir string) (int64, error) {
	p, err := syscall.UTF16PtrFromString(dir)
	if err != nil {
		return 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	var avail, total, free uint64
	proc := syscall.NewLazyDLL("kernel32.dll").NewProc("GetDiskFreeSpaceExW")
	r, _, callErr := proc.Call(uintptr(unsafe.Pointer(p)),
		uintptr(unsafe.Pointer(&avail)), uintptr(unsafe.Pointer(&total)), uintptr(unsafe.Pointer(&free)))
	if r == 0 {
		return 0, fmt.Errorf("free space of %s: %w", dir, callErr)
	}
	return int64(avail), nil
}
