package engine

import "syscall"

// dieWithParent asks Linux to SIGKILL the child when headroom dies, even
// by SIGKILL. The signal is tied to the thread that started the child;
// Go keeps that thread for the life of the process unless a goroutine
// locked to it exits, which Start never does.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
