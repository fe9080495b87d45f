//go:build unix

package engine

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup puts the child in a process group of its own, so a
// signal reaches everything it spawned and a Ctrl-C meant for headroom
// (sent by the terminal to headroom's group) is left for Stop to handle.
// Where the system allows, the child is also killed when headroom dies
// (see dieWithParent), since a llama-server nobody can stop would hold
// its memory with no booking left for it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(cmd.SysProcAttr)
}

// processGroup is the group a child started by Start leads: its own id.
func processGroup(pid int) int { return pid }

func terminate(p *os.Process) error { return signalGroup(p, syscall.SIGTERM) }

func kill(p *os.Process) error { return signalGroup(p, syscall.SIGKILL) }

// signalGroup signals the child's process group (its pid, as Setpgid made
// it the leader). A group that is already gone is not an error: the child
// exited on its own between the caller's check and the signal.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	err := syscall.Kill(-p.Pid, sig)
	if err == nil || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	// The group may be unreachable (EPERM after a setuid grandchild);
	// the child itself still can be.
	if err2 := p.Signal(sig); err2 != nil && !errors.Is(err2, os.ErrProcessDone) {
		return errors.Join(err, err2)
	}
	return nil
}
