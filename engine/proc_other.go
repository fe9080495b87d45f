//go:build !unix

package engine

import (
	"errors"
	"os"
	"os/exec"
)

// setProcessGroup does nothing where there are no POSIX process groups;
// Stop then reaches the child only.
func setProcessGroup(*exec.Cmd) {}

// processGroup is 0: there are no process groups.
func processGroup(int) int { return 0 }

// terminate has no gentle form without POSIX signals: the child is killed.
func terminate(p *os.Process) error { return kill(p) }

func kill(p *os.Process) error {
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}
