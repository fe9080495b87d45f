package engine

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/plan"
)

// Row compares one group of buffers: every planned and every logged buffer
// of one buffer type and kind. Several log lines can share a group (the
// non-SWA and SWA KV caches of one device); their figures are summed.
type Row struct {
	// Model is plan.ModelDraft for the speculative draft context's
	// buffers, "" for the model's own.
	Model      string `json:"model,omitempty"`
	BufferType string `json:"buffer_type"`
	Kind       string `json:"kind"`
	// PlannedBytes is what headroom planned (0 when nothing was).
	PlannedBytes int64 `json:"planned_bytes"`
	// LoggedMiB is what llama.cpp printed, summed (0 when nothing was).
	LoggedMiB float64 `json:"logged_mib"`
	// DiffBytes is logged minus planned: positive when the engine took more
	// than planned. The logged side is the printed MiB times 2^20, so it is
	// exact only to the printed rounding (about 5 KiB a line).
	DiffBytes int64 `json:"diff_bytes"`
	// Within says the plan agrees with the engine. For model, kv, rs and
	// output buffers that means exactly: the planned bytes print as
	// llama.cpp printed them (for a group of several lines, they lie in
	// the range of sums the printed figures allow). For compute buffers
	// it means within 5% or 16 MiB, and never more than 2% under.
	Within bool `json:"within"`
	// Lines is how many log lines the group holds.
	Lines int `json:"lines"`
}

// Reconciliation is the plan set against what the engine logged.
type Reconciliation struct {
	// Rows are the groups that were both planned and logged.
	Rows []Row `json:"rows"`
	// PlannedOnly are groups planned but never logged (their LoggedMiB is
	// 0); LoggedOnly are groups logged but not planned.
	PlannedOnly []Row `json:"planned_only"`
	LoggedOnly  []Row `json:"logged_only"`
	// Projected marks a plan of llama.cpp's projection, an upper bound
	// (ReconcileProjected): a row is within when the engine took no more,
	// and a group planned but not logged is no miss.
	Projected bool `json:"projected,omitempty"`
}

// Compute tolerance: replayed compute buffers land within a few percent,
// estimated ones within this, and a small buffer may be off by a fixed
// amount without mattering for fit.
const (
	computeTolerance    = 0.05
	computeToleranceMiB = 16
	computeUnder        = 0.02
)

// Reconcile matches planned buffers with the ones llama.cpp logged, by
// buffer type and kind, as the conformance suite does. A planned group
// whose bytes print as 0.00 MiB and was not logged is not counted:
// llama.cpp may skip empty buffers.
func Reconcile(planned []plan.Buffer, logged []Logged) Reconciliation {
	type key struct{ model, buft, kind string }
	type group struct {
		row    Row
		lo, hi int64
		p, l   bool
	}
	groups := map[key]*group{}
	var order []key
	get := func(k key) *group {
		g := groups[k]
		if g == nil {
			g = &group{row: Row{Model: k.model, BufferType: k.buft, Kind: k.kind}}
			groups[k] = g
			order = append(order, k)
		}
		return g
	}
	for _, b := range logged {
		g := get(key{b.Model, b.Device, b.Kind})
		lo, hi := printedBounds(b.Printed)
		g.lo += lo
		g.hi += hi
		g.row.LoggedMiB += b.MiB
		g.row.Lines++
		g.l = true
	}
	for _, b := range planned {
		if b.Model == plan.ModelProjector {
			continue // libmtmd logs its buffers in lines of its own, not read here
		}
		g := get(key{b.Model, b.BufferType, string(b.Kind)})
		g.row.PlannedBytes += b.Bytes
		g.p = true
	}

	var r Reconciliation
	for _, k := range order {
		g := groups[k]
		row := &g.row
		// Round the summed figure to the printed precision first so float
		// noise from summing does not leak into the byte count.
		loggedBytes := int64(math.Round(math.Round(row.LoggedMiB*100) / 100 * (1 << 20)))
		row.LoggedMiB = math.Round(row.LoggedMiB*100) / 100
		row.DiffBytes = loggedBytes - row.PlannedBytes
		switch {
		case g.p && g.l:
			if row.Kind == "compute" {
				row.Within = ComputeWithin(row.PlannedBytes, loggedBytes)
			} else {
				row.Within = g.lo <= row.PlannedBytes && row.PlannedBytes <= g.hi
			}
			r.Rows = append(r.Rows, *row)
		case g.p:
			if printMiB(row.PlannedBytes) != "0.00" {
				r.PlannedOnly = append(r.PlannedOnly, *row)
			}
		default:
			r.LoggedOnly = append(r.LoggedOnly, *row)
		}
	}
	for _, rows := range [][]Row{r.Rows, r.PlannedOnly, r.LoggedOnly} {
		sort.SliceStable(rows, func(i, j int) bool {
			if rows[i].Model != rows[j].Model {
				return rows[i].Model < rows[j].Model
			}
			if a, b := kindRank(rows[i].Kind), kindRank(rows[j].Kind); a != b {
				return a < b
			}
			return rows[i].BufferType < rows[j].BufferType
		})
	}
	return r
}

// ComputeWithin holds a planned compute buffer to the accounting bounds,
// here and in the conformance suite: within 5% or 16 MiB of the engine's,
// and never more than 2% under it, since an under-estimate is the
// direction in which a plan that fits fails to load.
func ComputeWithin(planned, logged int64) bool {
	d := float64(planned - logged)
	if d < -computeUnder*float64(logged) {
		return false
	}
	return math.Abs(d) <= computeToleranceMiB*(1<<20) || math.Abs(d) <= computeTolerance*float64(logged)
}

// kindRank orders kinds as llama.cpp allocates them.
func kindRank(kind string) int {
	switch kind {
	case "model":
		return 0
	case "output":
		return 1
	case "kv":
		return 2
	case "rs":
		return 3
	case "compute":
		return 4
	}
	return 5
}

// printMiB prints bytes as llama.cpp does: bytes/2^20 with two decimals.
func printMiB(bytes int64) string {
	return strconv.FormatFloat(float64(bytes)/(1<<20), 'f', 2, 64)
}

// printedBounds is the range of byte counts that print as the figure p.
func printedBounds(p string) (lo, hi int64) {
	v, err := strconv.ParseFloat(p, 64)
	if err != nil {
		return 0, -1
	}
	lo = int64(math.Ceil((v - 0.005) * (1 << 20)))
	hi = int64(math.Floor((v + 0.005) * (1 << 20)))
	// The float arithmetic can be a byte off at either edge; settle the
	// edges by printing, which is the definition.
	for lo > 0 && printMiB(lo-1) == p {
		lo--
	}
	for lo <= hi && printMiB(lo) != p {
		lo++
	}
	for printMiB(hi+1) == p {
		hi++
	}
	for hi >= lo && printMiB(hi) != p {
		hi--
	}
	return max(lo, 0), hi
}

// OK reports whether the engine allocated what was planned: every group
// matched and within its tolerance.
func (r Reconciliation) OK() bool {
	if len(r.PlannedOnly) > 0 && !r.Projected || len(r.LoggedOnly) > 0 {
		return false
	}
	for _, row := range r.Rows {
		if !row.Within {
			return false
		}
	}
	return true
}

// Summary says in one line how the engine compares with the plan, for
// example "engine matches plan: 5 of 5 buffers; compute +3.1 MiB (0.6%)".
func (r Reconciliation) Summary() string {
	total := len(r.Rows) + len(r.PlannedOnly) + len(r.LoggedOnly)
	if total == 0 {
		return "nothing to compare: no buffers planned or logged"
	}
	within := 0
	var off []string
	var computePlanned, computeDiff int64
	var computeLogged float64
	computeRows := 0
	for _, row := range r.Rows {
		if row.Within {
			within++
		} else {
			off = append(off, describeOff(row))
		}
		if row.Kind == "compute" {
			computeRows++
			computePlanned += row.PlannedBytes
			computeLogged += row.LoggedMiB
			computeDiff += row.DiffBytes
		}
	}
	var parts []string
	if r.Projected {
		verdict := "engine within llama.cpp's projection"
		if !r.OK() {
			verdict = "engine BEYOND llama.cpp's projection"
		}
		parts = append(parts, fmt.Sprintf("%s: %d of %d groups at or under it", verdict, within, len(r.Rows)+len(r.LoggedOnly)))
		parts = append(parts, off...)
		if n := names(r.LoggedOnly); n != "" {
			parts = append(parts, "logged but not projected: "+n)
		}
		return strings.Join(parts, "; ")
	}
	if r.OK() {
		parts = append(parts, fmt.Sprintf("engine matches plan: %d of %d buffers", within, total))
	} else {
		parts = append(parts, fmt.Sprintf("engine differs from plan: %d of %d buffers as planned", within, total))
	}
	parts = append(parts, off...)
	if computeRows > 0 && r.OK() {
		parts = append(parts, "compute "+signedMiB(computeDiff, computeLogged))
	}
	if n := names(r.PlannedOnly); n != "" {
		parts = append(parts, "planned but not logged: "+n)
	}
	if n := names(r.LoggedOnly); n != "" {
		parts = append(parts, "logged but not planned: "+n)
	}
	return strings.Join(parts, "; ")
}

// describeOff says how a row misses. Exact kinds are shown as the two
// printed figures, since a difference below 0.1 MiB still matters there.
func describeOff(row Row) string {
	if row.Kind == "compute" {
		return fmt.Sprintf("%s compute %s", row.BufferType, signedMiB(row.DiffBytes, row.LoggedMiB))
	}
	return fmt.Sprintf("%s %s planned %s MiB, logged %.2f MiB", row.BufferType, row.Kind, printMiB(row.PlannedBytes), row.LoggedMiB)
}

// signedMiB prints a difference in MiB with its share of the logged size.
func signedMiB(diff int64, loggedMiB float64) string {
	mib := float64(diff) / (1 << 20)
	if loggedMiB <= 0 {
		return fmt.Sprintf("%+.1f MiB", mib)
	}
	return fmt.Sprintf("%+.1f MiB (%.1f%%)", mib, 100*mib/loggedMiB)
}

// names lists unmatched groups with their size on the side that has one.
func names(rows []Row) string {
	s := make([]string, len(rows))
	for i, row := range rows {
		size := printMiB(row.PlannedBytes)
		if row.Lines > 0 {
			size = strconv.FormatFloat(row.LoggedMiB, 'f', 2, 64)
		}
		s[i] = fmt.Sprintf("%s %s %s MiB", row.BufferType, row.Kind, size)
	}
	return strings.Join(s, ", ")
}
