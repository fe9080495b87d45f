//go:build unix

package scratch

import (
	"errors"
	"syscall"
)

// alive reports whether process pid may still run: only a process that
// certainly does not (ESRCH) is gone.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return !errors.Is(err, syscall.ESRCH)
}
