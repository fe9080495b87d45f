package admission

import (
	"bytes"
	"os"
	"strconv"
)

// startTimes says this system tells a process's start time, so that a
// booked llama-server can be proved to be the process it names.
const startTimes = true

// procStat returns a process's state letter, process group and start time
// (clock ticks after boot) from /proc/PID/stat; ok is false when it cannot
// be read.
func procStat(pid int) (state byte, pgrp int, start uint64, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0, false
	}
	// The command name, field 2, is in parentheses and may hold spaces or
	// parentheses itself; the fields after the last ')' are plain.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, 0, false
	}
	f := bytes.Fields(data[i+1:])
	// f[0] is field 3 (state), f[2] field 5 (pgrp); starttime is field 22.
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, 0, false
	}
	start, err = strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, 0, 0, false
	}
	pgrp, err = strconv.Atoi(string(f[2]))
	if err != nil {
		return 0, 0, 0, false
	}
	return f[0][0], pgrp, start, true
}

// startTime is a process's start time, or 0 when it cannot be read.
func startTime(pid int) uint64 {
	_, _, start, _ := procStat(pid)
	return start
}

// processGroup is the process group of pid, or 0 when it cannot be read.
func processGroup(pid int) int {
	_, pgrp, _, _ := procStat(pid)
	return pgrp
}

func zombie(pid int) bool {
	state, _, _, ok := procStat(pid)
	return ok && (state == 'Z' || state == 'X')
}
