package admission

import (
	"bytes"
	"os"
	"strconv"
)

// procStat returns a process's state letter and start time (clock ticks
// after boot) from /proc/PID/stat; ok is false when it cannot be read.
func procStat(pid int) (state byte, start uint64, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command name, field 2, is in parentheses and may hold spaces or
	// parentheses itself; the fields after the last ')' are plain.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(data[i+1:])
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 {
		return 0, 0, false
	}
	start, err = strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil || len(f[0]) != 1 {
		return 0, 0, false
	}
	return f[0][0], start, true
}

// startTime is a process's start time, or 0 when it cannot be read.
func startTime(pid int) uint64 {
	_, start, _ := procStat(pid)
	return start
}

func zombie(pid int) bool {
	state, _, ok := procStat(pid)
	return ok && (state == 'Z' || state == 'X')
}
