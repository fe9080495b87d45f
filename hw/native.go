package hw

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// nativeList is what llama-server --list-devices printed: the accelerator
// devices the engine will see, with the memory figures ggml_backend_dev_memory
// gives it (the CPU device is never listed).
type nativeList struct {
	devices []nativeDevice
}

type nativeDevice struct {
	name, desc  string
	total, free int64
}

// nativeDeviceLine matches one device line. llama.cpp's common/arg.cpp
// prints it as
//
//	printf("  %s: %s (%zu MiB, %zu MiB free)\n", name, description, total/MiB, free/MiB)
//
// after an "Available devices:" header, or "  (none)" when there are none.
var nativeDeviceLine = regexp.MustCompile(`^\s+([A-Za-z]\w*):\s+(.*?)\s+\((\d+) MiB, (\d+) MiB free\)\s*$`)

// parseListDevices reads llama-server --list-devices. Backends log to
// stderr while they load, so only the lines after the header count; a
// missing header means the program is not a llama.cpp that knows the flag.
func parseListDevices(out []byte) (*nativeList, error) {
	list := &nativeList{}
	header := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "Available devices:" {
			header = true
			continue
		}
		if !header {
			continue
		}
		mt := nativeDeviceLine.FindStringSubmatch(line)
		if mt == nil {
			continue
		}
		total, _ := strconv.ParseInt(mt[3], 10, 64)
		free, _ := strconv.ParseInt(mt[4], 10, 64)
		list.devices = append(list.devices, nativeDevice{name: mt[1], desc: mt[2], total: total << 20, free: free << 20})
	}
	if !header {
		return nil, fmt.Errorf(`expected an "Available devices:" line, found none`)
	}
	return list, nil
}

// probeNative asks llama-server which devices it sees: the names the
// engine gives them and the memory it will plan with. It is the evidence
// the other probes are reconciled with. Any failure is a note.
func probeNative(ctx context.Context, r Runner, program string, m *machine) *nativeList {
	exe, err := r.LookPath(program)
	if err != nil {
		return nil
	}
	out, stderr, err := r.Output(ctx, exe, "--list-devices")
	if err != nil {
		m.notef("%s --list-devices failed (%v): %s", program, err, firstLine(stderr, out))
		return nil
	}
	list, err := parseListDevices(out)
	if err != nil {
		m.notef("%s --list-devices: %v", program, err)
		return nil
	}
	m.notef("device views and their memory as %s reports them (llama-server --list-devices)", exe)
	return list
}
