package hw

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/internal/units"
)

// probeLinux reads system memory from /proc and /sys, then asks each GPU
// vendor's probe in turn.
func probeLinux(ctx context.Context, o ProbeOptions, m *machine) error {
	h, err := linuxMemory(o.Root)
	if err != nil {
		return err
	}
	m.host = h
	m.host.cpuFree = ptr(h.total)
	if lim, src, ok := cgroupLimit(o.Root); ok && lim < h.total {
		m.host.limit = lim
		m.host.source += "; usable: " + src
		m.notef("this process runs under a memory limit of %s (%s); plans count only that", units.Size(lim), src)
		if used, ok := cgroupUsage(o.Root); ok && m.host.avail != nil && lim-used < *m.host.avail {
			*m.host.avail = max(lim-used, 0)
		}
	}
	if h.swap > 0 {
		m.notef("swap of %s is noted and never counted as room: a model that only fits by swapping does not fit", units.Size(h.swap))
	}
	m.host.cpu, m.host.features = cpuInfo(o.Root)
	if err := ctx.Err(); err != nil {
		return err
	}
	m.gpus = append(m.gpus, probeNVIDIA(ctx, o.Runner, m)...)
	m.gpus = append(m.gpus, probeDRM(o.Root, m)...)
	return nil
}

// linuxMemory reads MemTotal, MemAvailable and SwapTotal from /proc/meminfo.
func linuxMemory(root fs.FS) (hostMemory, error) {
	data, err := fs.ReadFile(root, "proc/meminfo")
	if err != nil {
		return hostMemory{}, fmt.Errorf("hw: reading system memory: %w", err)
	}
	fields := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 1 && f[1] == "kB" {
			v *= 1024 // /proc/meminfo's kB are KiB
		}
		fields[key] = v
	}
	total, ok := fields["MemTotal"]
	if !ok || total <= 0 {
		return hostMemory{}, fmt.Errorf("hw: /proc/meminfo: expected a positive MemTotal line, found none")
	}
	h := hostMemory{total: total, swap: fields["SwapTotal"], source: "/proc/meminfo MemTotal, MemAvailable"}
	if avail, ok := fields["MemAvailable"]; ok {
		h.avail = ptr(avail)
	} else {
		h.source = "/proc/meminfo MemTotal (no MemAvailable: kernel older than 3.14)"
	}
	return h, nil
}

// cpuInfo reads the first CPU's name ("model name"; Arm kernels have none)
// and its instruction-set flags ("flags" on x86, "Features" on Arm) from
// /proc/cpuinfo.
func cpuInfo(root fs.FS) (name string, features []string) {
	data, err := fs.ReadFile(root, "proc/cpuinfo")
	if err != nil {
		return "", nil
	}
	var flags []string
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k = strings.TrimSpace(k); {
		case k == "model name" && name == "":
			name = strings.TrimSpace(v)
		case (k == "flags" || k == "Features") && flags == nil:
			flags = strings.Fields(v)
		}
	}
	return name, cpuFeatures(flags)
}

// cpuFeatures keeps the instruction sets that change what ggml's CPU
// backend does (which weights it repacks, which kernels it runs), under the
// names the planner uses.
func cpuFeatures(flags []string) []string {
	names := map[string]string{
		"avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c",
		"avx512f": "avx512", "avx512_vnni": "avx512_vnni", "avx512_bf16": "avx512_bf16",
		"avx_vnni": "avx_vnni", "amx_int8": "amx_int8",
		"asimd": "neon", "asimddp": "dotprod", "i8mm": "i8mm", "sve": "sve", "sve2": "sve2",
	}
	var out []string
	for _, f := range flags {
		if n, ok := names[f]; ok && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// cgroupLimit finds the tightest memory limit on this process's cgroup and
// its ancestors, v2 (memory.max) or v1 (memory.limit_in_bytes). A limit at
// or above physical memory is no limit, which is how v1 spells "none".
func cgroupLimit(root fs.FS) (limit int64, source string, ok bool) {
	for _, g := range cgroupPaths(root) {
		for dir := g.dir; ; dir = path.Dir(dir) {
			data, err := fs.ReadFile(root, path.Join(g.mount, dir, g.limitFile))
			if err == nil {
				s := strings.TrimSpace(string(data))
				if v, err := strconv.ParseInt(s, 10, 64); err == nil && v > 0 && (!ok || v < limit) {
					limit, source, ok = v, fmt.Sprintf("cgroup %s %s", path.Join("/", dir), g.limitFile), true
				}
			}
			if dir == "." || dir == "/" {
				break
			}
		}
	}
	return limit, source, ok
}

// cgroupUsage is the memory this process's cgroup already uses.
func cgroupUsage(root fs.FS) (int64, bool) {
	for _, g := range cgroupPaths(root) {
		data, err := fs.ReadFile(root, path.Join(g.mount, g.dir, g.usageFile))
		if err != nil {
			continue
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err == nil {
			return v, true
		}
	}
	return 0, false
}

type cgroupPath struct {
	mount, dir           string // "sys/fs/cgroup/memory", "docker/abc" (relative)
	limitFile, usageFile string
}

// cgroupPaths reads /proc/self/cgroup: "0::/path" is v2, "N:memory:/path"
// v1. Inside a container the listed path may not exist under the mount (the
// namespace's root is the container's group), so the mount's root is tried
// as well.
func cgroupPaths(root fs.FS) []cgroupPath {
	data, err := fs.ReadFile(root, "proc/self/cgroup")
	if err != nil {
		return nil
	}
	var out []cgroupPath
	add := func(mount, dir, limit, usage string) {
		dir = strings.TrimPrefix(path.Clean("/"+dir), "/")
		if dir == "" {
			dir = "."
		}
		if _, err := fs.Stat(root, path.Join(mount, dir)); err != nil {
			dir = "."
		}
		if _, err := fs.Stat(root, path.Join(mount, dir, limit)); err == nil {
			out = append(out, cgroupPath{mount, dir, limit, usage})
		}
	}
	for line := range strings.Lines(string(data)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			add("sys/fs/cgroup", parts[2], "memory.max", "memory.current")
			add("sys/fs/cgroup/unified", parts[2], "memory.max", "memory.current")
		case strings.Contains(","+parts[1]+",", ",memory,"):
			add("sys/fs/cgroup/memory", parts[2], "memory.limit_in_bytes", "memory.usage_in_bytes")
		}
	}
	return out
}

// readInt reads a file holding one integer, as sysfs attributes do; hex
// (0x1002) is accepted.
func readInt(root fs.FS, name string) (int64, bool) {
	data, err := fs.ReadFile(root, name)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 0, 64)
	return v, err == nil
}

// readString reads a one-line file, trimmed.
func readString(root fs.FS, name string) string {
	data, err := fs.ReadFile(root, name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}
