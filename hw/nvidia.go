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

// nvidiaQuery is the nvidia-smi query the NVIDIA probe runs. Memory figures
// come in MiB; a unified-memory part (GB10, Grace) answers [N/A] for them.
const nvidiaQuery = "--query-gpu=index,name,pci.bus_id,memory.total,memory.used,memory.free"

// probeNVIDIA asks nvidia-smi for each GPU's memory and, from its process
// table, who else holds some of it. No nvidia-smi, no NVIDIA GPUs: that is
// not worth a note unless sysfs shows an NVIDIA card (probeDRM says so).
func probeNVIDIA(ctx context.Context, r Runner, m *machine) []*gpu {
	if _, err := r.LookPath("nvidia-smi"); err != nil {
		return nil
	}
	out, stderr, err := r.Output(ctx, "nvidia-smi", nvidiaQuery, "--format=csv,noheader,nounits")
	if err != nil {
		m.notef("nvidia-smi failed (%v): %s; NVIDIA GPUs are left out", err, firstLine(stderr, out))
		return nil
	}
	gpus, err := parseNVIDIAQuery(out)
	if err != nil {
		m.notef("nvidia-smi: %v; NVIDIA GPUs are left out", err)
		return nil
	}
	if len(gpus) == 0 {
		return nil
	}
	table, _, err := r.Output(ctx, "nvidia-smi")
	if err == nil {
		procs := parseNVIDIAProcesses(table)
		for _, g := range gpus {
			g.processes = procs[g.index]
		}
	}
	return gpus
}

// parseNVIDIAQuery reads the CSV nvidia-smi prints for nvidiaQuery with
// --format=csv,noheader,nounits: "0, NVIDIA GeForce RTX 4090,
// 00000000:01:00.0, 24564, 1023, 23108".
func parseNVIDIAQuery(out []byte) ([]*gpu, error) {
	var gpus []*gpu
	sc := bufio.NewScanner(bytes.NewReader(out))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 6 {
			return nil, fmt.Errorf("line %d: expected 6 comma-separated fields (%s), found %d: %q", n, nvidiaQuery, len(f), line)
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		idx, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("line %d: expected a GPU index first, found %q", n, f[0])
		}
		g := &gpu{vendor: "nvidia", index: idx, name: f[1], busID: normalizeBusID(f[2])}
		total, okT := mib(f[3])
		used, okU := mib(f[4])
		free, okF := mib(f[5])
		switch {
		case okT:
			g.total = total
			g.source = "nvidia-smi memory.total, memory.free"
			if okF {
				g.free = ptr(free)
			} else if okU {
				g.free = ptr(total - used)
			}
		default:
			// GB10 and Grace parts have no framebuffer of their own: NVML
			// answers NOT_SUPPORTED, nvidia-smi prints [N/A], and the GPU
			// allocates from system RAM (ggml's CUDA backend reports
			// MemAvailable as its free memory).
			g.unified = true
			g.source = fmt.Sprintf("nvidia-smi reports %s for %s's memory: unified with system RAM", f[3], f[1])
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// mib parses a MiB figure; [N/A], [Not Supported] and the like are not one.
func mib(s string) (int64, bool) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v << 20, true
}

// normalizeBusID turns NVML's "00000000:01:00.0" into sysfs's
// "0000:01:00.0", so the NVIDIA and DRM probes agree on addresses.
func normalizeBusID(id string) string {
	id = strings.ToLower(strings.TrimSpace(id))
	dom, rest, ok := strings.Cut(id, ":")
	if !ok || strings.Count(rest, ":") != 1 {
		return ""
	}
	if v, err := strconv.ParseUint(dom, 16, 32); err == nil {
		dom = fmt.Sprintf("%04x", v)
	}
	return dom + ":" + rest
}

// nvidiaProcessLine matches a row of nvidia-smi's process table, with or
// without the GI/CI columns that MIG-capable drivers print:
//
//	|    0   N/A  N/A      1841      G   /usr/lib/xorg/Xorg                      412MiB |
//	|    0      1841      G   /usr/lib/xorg/Xorg                412MiB |
var nvidiaProcessLine = regexp.MustCompile(`^\|\s+(\d+)\s+(?:\S+\s+\S+\s+)?(\d+)\s+(C\+G|G\+C|C|G|M\+C|M)\s+(.+?)\s+(\d+|N/A)(?:MiB)?\s+\|$`)

// parseNVIDIAProcesses reads the Processes section of plain nvidia-smi
// output, the only place it lists graphics clients (the compositor, a
// browser) as well as compute ones, keyed by GPU index.
func parseNVIDIAProcesses(out []byte) map[int][]Process {
	procs := map[int][]Process{}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.Contains(line, "Processes:") {
			in = true
			continue
		}
		if !in {
			continue
		}
		mt := nvidiaProcessLine.FindStringSubmatch(line)
		if mt == nil || mt[5] == "N/A" {
			continue
		}
		idx, _ := strconv.Atoi(mt[1])
		pid, _ := strconv.Atoi(mt[2])
		n, _ := strconv.ParseInt(mt[5], 10, 64)
		use := map[string]string{"G": "graphics", "C": "compute", "C+G": "graphics+compute", "G+C": "graphics+compute",
			"M": "compute", "M+C": "compute"}[mt[3]]
		procs[idx] = append(procs[idx], Process{PID: pid, Name: mt[4], Use: use, Bytes: n << 20})
	}
	return procs
}

// firstLine is the first non-empty line among outputs, for a short note.
func firstLine(outs ...[]byte) string {
	for _, o := range outs {
		for line := range strings.Lines(string(o)) {
			if s := strings.TrimSpace(line); s != "" {
				return s
			}
		}
	}
	return "no output"
}
