package engine

import (
	"math"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/conformance"
	"github.com/headroom-llm/headroom/plan"
)

// plannedFrom turns golden buffers into a plan that agrees with them: each
// printed figure back in bytes.
func plannedFrom(bufs []conformance.Buffer) []plan.Buffer {
	out := make([]plan.Buffer, len(bufs))
	for i, b := range bufs {
		out[i] = plan.Buffer{Device: b.DeviceOrBufferType, BufferType: b.DeviceOrBufferType, Kind: plan.BufferKind(b.Kind),
			Bytes: int64(math.Round(b.MiB * (1 << 20)))}
	}
	return out
}

func loggedFrom(bufs []conformance.Buffer) []Logged {
	out := make([]Logged, len(bufs))
	for i, b := range bufs {
		out[i] = Logged{Source: b.Source, Device: b.DeviceOrBufferType, Kind: b.Kind, Cache: b.Cache, MiB: b.MiB, Printed: b.Printed}
	}
	return out
}

// TestReconcileGolden: a plan equal to the engine's figures reconciles on
// every golden case, including the ones with several kv lines per device.
func TestReconcileGolden(t *testing.T) {
	t.Parallel()
	for _, c := range loadGolden(t) {
		r := Reconcile(plannedFrom(c.Figures.Buffers), ParseLog(c.Log))
		if !r.OK() || len(r.Rows) == 0 {
			t.Errorf("%s: %s", c.ID, r.Summary())
		}
		if !strings.HasPrefix(r.Summary(), "engine matches plan: ") {
			t.Errorf("%s: summary %q", c.ID, r.Summary())
		}
	}
}

func TestReconcilePerturbed(t *testing.T) {
	t.Parallel()
	cases := loadGolden(t)
	// An iswa case has two kv lines for one device: the group is compared
	// as a sum.
	var c *conformance.Case
	for i := range cases {
		if len(cases[i].BuffersOf("kv")) == 4 && len(cases[i].BuffersOf("compute")) == 2 {
			c = &cases[i]
			break
		}
	}
	if c == nil {
		t.Fatal("no golden case with four kv lines and two compute buffers")
	}
	logged := loggedFrom(c.Figures.Buffers)
	index := func(p []plan.Buffer, kind plan.BufferKind) int {
		for i, b := range p {
			if b.Kind == kind {
				return i
			}
		}
		t.Fatalf("%s: no %s buffer", c.ID, kind)
		return -1
	}

	tests := []struct {
		name    string
		change  func([]plan.Buffer) []plan.Buffer
		ok      bool
		summary []string
		check   func(t *testing.T, r Reconciliation)
	}{
		{
			name:    "model off by 64 KiB",
			change:  func(p []plan.Buffer) []plan.Buffer { p[index(p, "model")].Bytes += 64 << 10; return p },
			summary: []string{"engine differs from plan", " model planned "},
		},
		{
			name:   "kv 20 KiB over on one device",
			change: func(p []plan.Buffer) []plan.Buffer { p[index(p, "kv")].Bytes += 20 << 10; return p },
			check: func(t *testing.T, r Reconciliation) {
				for _, row := range r.Rows {
					if row.Kind == "kv" && row.Within != (row.BufferType != c.BuffersOf("kv")[0].DeviceOrBufferType) {
						t.Errorf("kv row %+v: only the perturbed device should be flagged", row)
					}
				}
			},
		},
		{
			name:    "planned compute 4 MiB over the engine's is within",
			change:  func(p []plan.Buffer) []plan.Buffer { p[index(p, "compute")].Bytes += 4 << 20; return p },
			ok:      true,
			summary: []string{"engine matches plan", "compute -4.0 MiB"},
		},
		{
			// Under by more than 2% is the dangerous direction (the plan
			// fits, the load fails), even inside 16 MiB.
			name:    "planned compute 4 MiB (2.7%) under the engine's is flagged",
			change:  func(p []plan.Buffer) []plan.Buffer { p[index(p, "compute")].Bytes -= 4 << 20; return p },
			summary: []string{"engine differs from plan", "compute +4.0 MiB (2.7%)"},
		},
		{
			name: "compute far under is flagged",
			change: func(p []plan.Buffer) []plan.Buffer {
				p[index(p, "compute")].Bytes = p[index(p, "compute")].Bytes/2 - 20<<20
				return p
			},
			summary: []string{"engine differs from plan", "compute +"},
		},
		{
			name: "output not planned",
			change: func(p []plan.Buffer) []plan.Buffer {
				i := index(p, "output")
				return append(p[:i:i], p[i+1:]...)
			},
			summary: []string{"logged but not planned: ", " output "},
			check: func(t *testing.T, r Reconciliation) {
				if len(r.LoggedOnly) != 1 || r.LoggedOnly[0].Kind != "output" || r.LoggedOnly[0].PlannedBytes != 0 {
					t.Errorf("LoggedOnly = %+v, want the output buffer", r.LoggedOnly)
				}
			},
		},
		{
			name: "a planned buffer the engine never logged",
			change: func(p []plan.Buffer) []plan.Buffer {
				return append(p, plan.Buffer{Device: "CUDA0", BufferType: "CUDA0", Kind: "model", Bytes: 100 << 20})
			},
			summary: []string{"planned but not logged: CUDA0 model 100.00 MiB"},
			check: func(t *testing.T, r Reconciliation) {
				if len(r.PlannedOnly) != 1 || r.PlannedOnly[0].LoggedMiB != 0 {
					t.Errorf("PlannedOnly = %+v", r.PlannedOnly)
				}
			},
		},
		{
			name: "an empty planned buffer is not missed",
			change: func(p []plan.Buffer) []plan.Buffer {
				return append(p, plan.Buffer{Device: "CPU", BufferType: "CPU_REPACK", Kind: "model", Bytes: 1024})
			},
			ok:      true,
			summary: []string{"engine matches plan"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Reconcile(tt.change(plannedFrom(c.Figures.Buffers)), logged)
			if r.OK() != tt.ok {
				t.Errorf("OK() = %v, want %v: %s", r.OK(), tt.ok, r.Summary())
			}
			for _, s := range tt.summary {
				if !strings.Contains(r.Summary(), s) {
					t.Errorf("summary %q lacks %q", r.Summary(), s)
				}
			}
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

func TestReconcileRows(t *testing.T) {
	t.Parallel()
	planned := []plan.Buffer{
		{Device: "CPU", BufferType: "CPU_Mapped", Kind: "model", Bytes: 8530186732},
		{Device: "CPU", BufferType: "CPU", Kind: "kv", Bytes: 112 << 20},
		{Device: "CPU", BufferType: "CPU", Kind: "kv", Bytes: 352 << 20},
		{Device: "CPU", BufferType: "CPU", Kind: "compute", Bytes: 514 << 20},
	}
	logged := ParseLog([]string{
		"load_tensors:   CPU_Mapped model buffer size =  8135.02 MiB",
		"llama_kv_cache_iswa: creating non-SWA KV cache, size = 4096 cells",
		"llama_kv_cache:        CPU KV buffer size =   112.00 MiB",
		"llama_kv_cache_iswa: creating     SWA KV cache, size = 4096 cells",
		"llama_kv_cache:        CPU KV buffer size =   352.00 MiB",
		"sched_reserve:        CPU compute buffer size =   517.03 MiB",
	})
	r := Reconcile(planned, logged)
	if len(r.Rows) != 3 || len(r.PlannedOnly)+len(r.LoggedOnly) != 0 {
		t.Fatalf("rows %+v, planned only %+v, logged only %+v", r.Rows, r.PlannedOnly, r.LoggedOnly)
	}
	kv := r.Rows[1]
	if kv.Kind != "kv" || kv.Lines != 2 || kv.PlannedBytes != 464<<20 || kv.LoggedMiB != 464 || kv.DiffBytes != 0 || !kv.Within {
		t.Errorf("kv row %+v, want the two caches summed and equal", kv)
	}
	comp := r.Rows[2]
	if comp.Kind != "compute" || comp.DiffBytes != int64(math.Round(517.03*(1<<20)))-514<<20 || !comp.Within {
		t.Errorf("compute row %+v", comp)
	}
	if got, want := r.Summary(), "engine matches plan: 3 of 3 buffers; compute +3.0 MiB (0.6%)"; got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
}

func TestPrintedBounds(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"0.00", "0.49", "112.00", "517.03", "8135.02"} {
		lo, hi := printedBounds(p)
		if printMiB(lo) != p || printMiB(hi) != p || printMiB(hi+1) == p || (lo > 0 && printMiB(lo-1) == p) {
			t.Errorf("printedBounds(%s) = [%d, %d]: not the exact range", p, lo, hi)
		}
		if clo, chi := (conformance.Buffer{Printed: p}).Bounds(); clo != lo || chi != hi {
			t.Errorf("printedBounds(%s) = [%d, %d], conformance says [%d, %d]", p, lo, hi, clo, chi)
		}
	}
}
