//go:build !unix

package admission

import (
	"errors"
	"os"
)

// Without flock the shared ledger cannot be kept safely; Ledger.Path is
// refused and bookings stay in one process.
var errNoFileLock = errors.New("a shared ledger file needs file locks, which this system's build lacks; leave Path empty")

const noFollow = 0

func lockFile(*os.File) error   { return errNoFileLock }
func unlockFile(*os.File) error { return nil }

func processAlive(pid int) bool { return pid > 0 }

func syncDir(string) error { return nil }

// signalLeader can only kill where there are no POSIX signals; Reap
// never calls it there, since start times are unknown.
func signalLeader(pid int, kill bool) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
