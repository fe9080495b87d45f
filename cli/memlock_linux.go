//go:build linux && !mips && !mipsle && !mips64 && !mips64le

package cli

import "syscall"

// rlimitMemlock is RLIMIT_MEMLOCK in asm-generic/resource.h, which every
// Linux port Go has but MIPS's uses (MIPS numbers it 9); package syscall
// does not name it.
const rlimitMemlock = 8

// memlockLimit is this process's RLIMIT_MEMLOCK soft limit, which a
// llama-server started from the same shell inherits. CAP_IPC_LOCK lifts
// it only where it holds in the host's user namespace, which a process
// cannot tell from inside a container (here, root with CAP_IPC_LOCK in
// CapEff under 'ulimit -l 8192' saw llama.cpp's mlock of 167.90 MiB fail
// with ENOMEM), so the limit is taken as it reads. why says why it could
// not be read.
func memlockLimit() (limit uint64, unlimited bool, why string) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(rlimitMemlock, &r); err != nil {
		return 0, false, "getrlimit: " + err.Error()
	}
	return r.Cur, r.Cur == ^uint64(0), ""
}
