//go:build unix && !linux

package engine

import "syscall"

// dieWithParent has no equivalent here: a llama-server outlives a killed
// headroom, its booking stays while it runs, and the next load reaps it
// (admission.Ledger.Reap).
func dieWithParent(*syscall.SysProcAttr) {}
