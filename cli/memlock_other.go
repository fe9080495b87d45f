//go:build !linux || mips || mipsle || mips64 || mips64le

package cli

// memlockLimit is read on Linux only (not on MIPS, whose resource
// numbers differ).
func memlockLimit() (limit uint64, unlimited bool, why string) {
	return 0, false, "read on Linux only"
}
