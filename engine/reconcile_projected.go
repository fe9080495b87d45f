package engine

import (
	"math"
	"sort"
	"strings"

	"github.com/headroom-llm/headroom/plan"
)

// ReconcileProjected sets what llama-server logged beside a plan made of
// llama.cpp's projection (ProjectedResult), whose groups are the
// breakdown's rows rather than buffer types: every host buffer type
// together ("Host"), the CPU's extra buffer types, each device; model,
// context (KV and recurrent state) and compute, and the output buffer
// apart. Such a plan is an upper bound: a group is within when
// llama-server took no more than planned. A group planned and not logged
// is no failure (the projection can count a buffer llama-server never
// makes); a group logged and not planned is.
func ReconcileProjected(planned []plan.Buffer, logged []Logged) Reconciliation {
	type key struct{ row, kind string }
	rows := map[key]*Row{}
	var order []key
	get := func(k key) *Row {
		r := rows[k]
		if r == nil {
			r = &Row{BufferType: k.row, Kind: k.kind}
			rows[k] = r
			order = append(order, k)
		}
		return r
	}
	for _, b := range logged {
		r := get(key{breakdownRowOf(b.Device), projectedKind(b.Kind)})
		r.LoggedMiB += b.MiB
		r.Lines++
	}
	for _, b := range planned {
		if b.Model != "" {
			continue // companions are not projected
		}
		r := get(key{breakdownRowOf(b.BufferType), projectedKind(string(b.Kind))})
		r.PlannedBytes += b.Bytes
	}
	rec := Reconciliation{Projected: true}
	for _, k := range order {
		r := rows[k]
		r.LoggedMiB = math.Round(r.LoggedMiB*100) / 100
		// The logged side at its least: each printed figure rounds
		// bytes to 0.01 MiB, and the engine took more than planned only
		// if no byte count that prints so is within the plan.
		loggedLeast := int64(math.Floor((r.LoggedMiB - 0.005*float64(r.Lines)) * (1 << 20)))
		r.DiffBytes = int64(math.Round(r.LoggedMiB*(1<<20))) - r.PlannedBytes
		switch {
		case r.Lines > 0 && r.PlannedBytes > 0:
			r.Within = loggedLeast <= r.PlannedBytes
			rec.Rows = append(rec.Rows, *r)
		case r.Lines > 0:
			rec.LoggedOnly = append(rec.LoggedOnly, *r)
		default:
			rec.PlannedOnly = append(rec.PlannedOnly, *r)
		}
	}
	for _, rs := range [][]Row{rec.Rows, rec.PlannedOnly, rec.LoggedOnly} {
		sort.SliceStable(rs, func(i, j int) bool {
			if a, b := kindRank(rs[i].Kind), kindRank(rs[j].Kind); a != b {
				return a < b
			}
			return rs[i].BufferType < rs[j].BufferType
		})
	}
	return rec
}

// breakdownRowOf is the breakdown row a buffer type or device counts in,
// as common_memory_breakdown_print groups them: host buffer types (the
// CPU's own, mapped or not, and every GPU's pinned host buffers) in
// "Host", the CPU's extra buffer types on their own, a device's buffers
// (mapped on Metal too) under the device.
func breakdownRowOf(name string) string {
	switch {
	case extraCPUBuffers[name]:
		return name
	case name == "Host" || name == "CPU" || strings.HasPrefix(name, "CPU_") || strings.HasSuffix(name, "_Host"):
		return "Host"
	}
	return strings.TrimSuffix(name, "_Mapped")
}

// projectedKind is the breakdown's part a buffer kind counts in: KV and
// recurrent state are both context.
func projectedKind(kind string) string {
	if kind == string(plan.KindRS) {
		return string(plan.KindKV)
	}
	return kind
}
