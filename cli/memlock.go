package cli

import "fmt"

// mlockWarning says whether llama.cpp's --mlock can lock locked bytes:
// on this machine (here) against RLIMIT_MEMLOCK, else what the other
// machine's limit must be. llama.cpp's llama_mlock (src/llama-mmap.cpp)
// locks as the load proceeds; when mlock fails it logs "failed to mlock
// N-byte buffer (after previously locking M bytes)" with, on ENOMEM, "Try
// increasing RLIMIT_MEMLOCK ('ulimit -l' as root)", never tries again,
// and loads on: what was locked stays locked, the rest is reclaimable as
// without --mlock. "" when there is nothing to say.
func mlockWarning(locked int64, here bool) string {
	if locked <= 0 {
		return ""
	}
	if !here {
		return fmt.Sprintf("--mlock locks %s; RLIMIT_MEMLOCK is not checked for --machine: 'ulimit -l' there must allow it, or llama.cpp's mlock fails and it loads on without locking", bytesIEC(locked))
	}
	limit, unlimited, why := memlockLimit()
	return mlockSays(locked, limit, unlimited, why)
}

// mlockSays is mlockWarning for this machine's limit, read as
// memlockLimit reads it.
func mlockSays(locked int64, limit uint64, unlimited bool, why string) string {
	switch {
	case why != "":
		return fmt.Sprintf("--mlock locks %s; RLIMIT_MEMLOCK not checked (%s)", bytesIEC(locked), why)
	case unlimited || uint64(locked) <= limit:
		return ""
	}
	return fmt.Sprintf("--mlock will fail here: RLIMIT_MEMLOCK ('ulimit -l') allows %s and the weights lock %s; llama.cpp warns \"failed to mlock\" and \"Try increasing RLIMIT_MEMLOCK\", stops locking and loads on, the rest of the weights reclaimable as without --mlock. Raise the limit before starting llama-server ('ulimit -l unlimited' as root, LimitMEMLOCK=infinity in a systemd unit, a memlock line in /etc/security/limits.conf; root outside a container is not limited) or leave --mlock out",
		bytesIEC(int64(min(limit, 1<<62))), bytesIEC(locked))
}
