package engine

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/plan"
)

// BreakdownRow is one row of the memory breakdown llama.cpp prints
// (common_memory_breakdown_print): the device a row names, or "Host" for
// every host buffer type together, or an extra CPU buffer type such as
// CPU_REPACK on its own, and what the load projects there, in whole MiB
// as printed.
type BreakdownRow struct {
	// Name is the device (Vulkan0, CUDA0, MTL0) without its description,
	// "Host", or a buffer type (CPU_REPACK).
	Name string `json:"name"`
	// Device is true for a device's row, which also prints its memory.
	Device  bool  `json:"device"`
	Self    int64 `json:"self_mib"`
	Model   int64 `json:"model_mib"`
	Context int64 `json:"context_mib"`
	Compute int64 `json:"compute_mib"`
}

// A device row: "|   - Vulkan0 (llvmpipe ...) |  2048 = 2048 + ( 381 =   278 +      36 +      66) +        -381 |".
// A host row: "|   - Host      |                  339 =   181 +      88 +      70                |".
var (
	breakdownDevice = regexp.MustCompile(`\|\s+- (\S+)(?: \(.*\))?\s+\|\s*-?\d+ = -?\d+ \+ \(\s*(-?\d+) =\s+(-?\d+) \+\s+(-?\d+) \+\s+(-?\d+)\)`)
	breakdownHost   = regexp.MustCompile(`\|\s+- (\S+)\s+\|\s+(-?\d+) =\s+(-?\d+) \+\s+(-?\d+) \+\s+(-?\d+)\s+\|`)
)

// ParseBreakdown reads the rows of llama.cpp's memory breakdown from its
// log lines; other lines are ignored. A row it cannot read is an error
// naming the line, not a row left out.
func ParseBreakdown(lines []string) ([]BreakdownRow, error) {
	var rows []BreakdownRow
	for _, l := range lines {
		i := strings.Index(l, "memory_breakdown_print: |")
		if i < 0 {
			continue
		}
		l = ansiEscape.ReplaceAllString(l[i+len("memory_breakdown_print: "):], "")
		if !strings.Contains(l, "- ") {
			continue // the heading row
		}
		var r BreakdownRow
		var f []string
		if m := breakdownDevice.FindStringSubmatch(l); m != nil {
			r.Name, r.Device, f = m[1], true, m[2:]
		} else if m := breakdownHost.FindStringSubmatch(l); m != nil {
			r.Name, f = m[1], m[2:]
		} else {
			return nil, fmt.Errorf("memory breakdown: expected a row \"- NAME | self = model + context + compute\", found %q", l)
		}
		for j, dst := range []*int64{&r.Self, &r.Model, &r.Context, &r.Compute} {
			n, err := strconv.ParseInt(f[j], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("memory breakdown row %q: %w", l, err)
			}
			*dst = n
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// extraCPUBuffers are the CPU's buffer types that are not host buffers:
// llama.cpp's breakdown lists them on their own rows.
var extraCPUBuffers = map[string]bool{"CPU_REPACK": true, "AMX": true, "CPU_KLEIDIAI": true}

// ProjectBreakdown sums planned buffers into the rows llama.cpp's
// breakdown prints for the same load: host buffer types into "Host" (of
// a mapped file, the tensors in it, which is what llama.cpp's projection
// counts), the CPU's extra buffer types on their own, each GPU by name;
// KV and recurrent state are context. The output buffer is in no row.
// Figures are bytes.
func ProjectBreakdown(planned []plan.Buffer, cpu string) map[string]*BreakdownRow {
	out := map[string]*BreakdownRow{}
	for _, b := range planned {
		name := b.Device
		switch {
		case b.Device == cpu && extraCPUBuffers[b.BufferType]:
			name = b.BufferType
		case b.Device == cpu || strings.HasSuffix(b.BufferType, "_Host"):
			name = "Host"
		}
		r := out[name]
		if r == nil {
			r = &BreakdownRow{Name: name, Device: name != "Host" && !extraCPUBuffers[name]}
			out[name] = r
		}
		switch b.Kind {
		case plan.KindModel:
			r.Model += b.ResidentBytes()
		case plan.KindKV, plan.KindRS:
			r.Context += b.Bytes
		case plan.KindCompute:
			r.Compute += b.Bytes
		}
	}
	for _, r := range out {
		r.Self = r.Model + r.Context + r.Compute
	}
	return out
}
