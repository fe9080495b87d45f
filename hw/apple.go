package hw

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/internal/units"
)

// appleWorkingSet is Metal's default recommendedMaxWorkingSetSize for a Mac
// with memsize bytes of RAM when iogpu.wired_limit_mb is left at 0: 2/3 of
// RAM below 36 GB and 3/4 from 36 GB up, as llama.cpp logs show it (16 GB ->
// 10.67 GiB, 32 -> 21.33, 36 -> 27, 48 -> 36, 64 -> 48, 128 -> 96; collected
// in the project's peers-and-hardware reference). Newer macOS releases have
// reported more (107.52 GiB on 128 GB), which is why a live reading from
// llama-server replaces this when there is one.
func appleWorkingSet(memsize int64) int64 {
	if memsize < 36<<30 {
		return memsize / 3 * 2
	}
	return memsize / 4 * 3
}

// probeDarwin reads an Apple Silicon Mac: one unified pool (hw.memsize), a
// GPU share set by iogpu.wired_limit_mb or Metal's default working set, and
// what is free now from vm_stat.
func probeDarwin(ctx context.Context, o ProbeOptions, m *machine) error {
	r := o.Runner
	out, stderr, err := r.Output(ctx, "sysctl", "-n", "hw.memsize")
	if err != nil {
		return fmt.Errorf("hw: sysctl -n hw.memsize: %w (%s)", err, firstLine(stderr))
	}
	memsize, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil || memsize <= 0 {
		return fmt.Errorf("hw: sysctl -n hw.memsize: expected a byte count, found %q", strings.TrimSpace(string(out)))
	}
	m.host = hostMemory{total: memsize, source: "sysctl hw.memsize"}
	if out, _, err := r.Output(ctx, "sysctl", "-n", "vm.swapusage"); err == nil {
		m.host.swap = parseSwapUsage(string(out))
		if m.host.swap > 0 {
			m.notef("swap of %s is noted and never counted as room: a model that only fits by swapping does not fit", units.Size(m.host.swap))
		}
	}
	if out, _, err := r.Output(ctx, "vm_stat"); err == nil {
		if free, ok := parseVMStat(string(out)); ok {
			m.host.avail = ptr(free)
			m.host.source += "; free: vm_stat free + inactive + speculative pages"
		}
	}
	brand := ""
	if out, _, err := r.Output(ctx, "sysctl", "-n", "machdep.cpu.brand_string"); err == nil {
		brand = strings.TrimSpace(string(out))
	}
	m.host.cpu = brand
	if !strings.HasPrefix(brand, "Apple") {
		m.notef("this Mac's CPU is %q, not Apple Silicon: its GPU, if any, is not described", brand)
		return nil
	}
	// Every Apple Silicon core has NEON; the rest the kernel reports.
	m.host.features = []string{"neon"}
	for _, f := range []struct{ sysctl, name string }{{"FEAT_DotProd", "dotprod"}, {"FEAT_I8MM", "i8mm"}} {
		if out, _, err := r.Output(ctx, "sysctl", "-n", "hw.optional.arm."+f.sysctl); err == nil && strings.TrimSpace(string(out)) == "1" {
			m.host.features = append(m.host.features, f.name)
		}
	}
	g := &gpu{vendor: "apple", name: brand, unified: true, usable: appleWorkingSet(memsize),
		source: "usable: Metal's default working set for this RAM size (2/3 below 36 GB, 3/4 from 36 GB, measured in llama.cpp logs)"}
	if out, _, err := r.Output(ctx, "sysctl", "-n", "iogpu.wired_limit_mb"); err == nil {
		if mb, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil && mb > 0 {
			g.usable = min(mb<<20, memsize)
			g.source = fmt.Sprintf("usable: iogpu.wired_limit_mb = %d, which Metal's working set follows", mb)
		}
	}
	m.gpus = append(m.gpus, g)
	return nil
}

var vmStatLine = regexp.MustCompile(`^Pages (free|inactive|speculative):\s+(\d+)\.?$`)

// parseVMStat estimates free memory from vm_stat: free, inactive and
// speculative pages, which macOS hands out before it compresses or swaps.
func parseVMStat(out string) (int64, bool) {
	var page int64
	if _, rest, ok := strings.Cut(out, "page size of "); ok {
		if f := strings.Fields(rest); len(f) > 0 {
			page, _ = strconv.ParseInt(f[0], 10, 64)
		}
	}
	if page <= 0 {
		return 0, false
	}
	var pages int64
	found := false
	for line := range strings.Lines(out) {
		if mt := vmStatLine.FindStringSubmatch(strings.TrimSpace(line)); mt != nil {
			n, _ := strconv.ParseInt(mt[2], 10, 64)
			pages += n
			found = true
		}
	}
	return pages * page, found
}

// parseSwapUsage reads "total = 2048.00M  used = 1024.50M  free = ..." from
// sysctl vm.swapusage.
func parseSwapUsage(out string) int64 {
	_, rest, ok := strings.Cut(out, "total = ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return 0
	}
	s := f[0]
	mult := map[byte]float64{'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}[s[len(s)-1]]
	if mult == 0 {
		return 0
	}
	v, err := strconv.ParseFloat(s[:len(s)-1], 64)
	if err != nil {
		return 0
	}
	return int64(v * mult)
}
