//go:build linux && !mips && !mipsle && !mips64 && !mips64le

package cli

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// capIPCLock is CAP_IPC_LOCK's bit in /proc/self/status's CapEff: a
// process holding it may lock memory beyond RLIMIT_MEMLOCK.
const capIPCLock = 14

// memlockLimit is this process's RLIMIT_MEMLOCK soft limit, which a
// llama-server started from the same shell inherits; unlimited also when
// the process may lock without a limit (CAP_IPC_LOCK). why says why it
// could not be read.
func memlockLimit() (limit uint64, unlimited bool, why string) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(rlimitMemlock, &r); err != nil {
		return 0, false, "getrlimit: " + err.Error()
	}
	if r.Cur == ^uint64(0) || hasCapIPCLock() {
		return r.Cur, true, ""
	}
	return r.Cur, false, ""
}

// rlimitMemlock is RLIMIT_MEMLOCK in asm-generic/resource.h, which every
// Linux port Go has but MIPS's uses (MIPS numbers it 9); package syscall
// does not name it.
const rlimitMemlock = 8

func hasCapIPCLock() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<capIPCLock) != 0
		}
	}
	return false
}
