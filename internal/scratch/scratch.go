// Package scratch makes the temporary directories headroom fills with
// large files (a model's sparse twin for llama-fit-params or
// llama-bench), named by the process that owns them, so that a run whose
// owner was killed (SIGKILL leaves no chance to clean up) is removed by
// the next one.
package scratch

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Dir makes a new directory under the system's temporary directory named
// prefix, this process's ID and a random part, after removing the ones of
// the same prefix whose process is gone.
func Dir(prefix string) (string, error) {
	sweep(os.TempDir(), prefix)
	return os.MkdirTemp("", prefix+strconv.Itoa(os.Getpid())+"-")
}

// sweep removes the directories under tmp named prefix+PID+"-..." whose
// process no longer runs. A directory it cannot tell about (another
// name, a process that runs, one it may not signal) is left.
func sweep(tmp, prefix string) int {
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() || alive(pid) {
			continue
		}
		if os.RemoveAll(filepath.Join(tmp, e.Name())) == nil {
			n++
		}
	}
	return n
}
