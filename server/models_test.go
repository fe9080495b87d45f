package server

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/speed"
)

type planAnswer struct {
	Chosen  *plan.Candidate `json:"chosen"`
	Command []string        `json:"command"`
	Explain []string        `json:"explain"`
	Speed   []speed.Result  `json:"speed"`
}

func TestPlan(t *testing.T) {
	h := newTestHandler(t, nil)
	cat, _ := catalog.Load()
	lock, _ := catalog.LoadLock()
	tests := []struct {
		name    string
		query   string
		variant [2]string
		machine string
		opts    func(*plan.SearchOptions)
		fits    bool
	}{
		{"defaults", "model=qwen3-8b/Q4_K_M&machine=rtx-4090", [2]string{"qwen3-8b", "Q4_K_M"}, "rtx-4090", nil, true},
		{"options", "model=qwen3-8b/Q4_K_M&machine=rtx-4090&parallel=4&min_ctx=8192&goal=context",
			[2]string{"qwen3-8b", "Q4_K_M"}, "rtx-4090",
			func(o *plan.SearchOptions) { o.Parallel, o.MinCtx, o.Goal = 4, 8192, plan.GoalContext }, true},
		{"partly on the GPU", "model=gemma-3-27b-it/Q8_0&machine=rtx-4090&parallel=1&headless=1",
			[2]string{"gemma-3-27b-it", "Q8_0"}, "rtx-4090",
			func(o *plan.SearchOptions) { o.Parallel, o.Headless = 1, true }, true},
		// Where nothing fits, the search's own answer, not an error.
		{"nothing fits", "model=qwen3-235b-a22b/Q8_0&machine=cpu-32", [2]string{"qwen3-235b-a22b", "Q8_0"}, "cpu-32", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := do(t, h, "GET", "/api/plan?"+tt.query, "", nil)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			got := decode[planAnswer](t, body)
			e := cat.Entry(tt.variant[0])
			m, _, _, err := cat.Model(e, *e.Variant(tt.variant[1]), lock)
			if err != nil {
				t.Fatal(err)
			}
			snap, _ := hw.LoadMachine(tt.machine)
			o := plan.DefaultSearch()
			if tt.opts != nil {
				tt.opts(&o)
			}
			want, err := plan.Search(m, snap, o)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.fits {
				if got.Chosen != nil || len(got.Explain) == 0 || !slices.Equal(got.Explain, want.Explain) {
					t.Errorf("chosen %v explain %q, want none and %q", got.Chosen, got.Explain, want.Explain)
				}
				return
			}
			if got.Chosen == nil || want.Chosen == nil {
				t.Fatalf("chosen %v, want %v (%q)", got.Chosen, want.Chosen, got.Explain)
			}
			if !slices.Equal(got.Chosen.Flags, want.Chosen.Flags) || got.Chosen.CtxPerSlot != want.Chosen.CtxPerSlot {
				t.Errorf("flags %q ctx/slot %d, want %q %d", got.Chosen.Flags, got.Chosen.CtxPerSlot, want.Chosen.Flags, want.Chosen.CtxPerSlot)
			}
			if len(got.Speed) != 2 || got.Speed[1].CtxTokens != got.Chosen.CtxPerSlot {
				t.Errorf("speed %+v, want estimates at an empty and a full slot", got.Speed)
			}
		})
	}
}

type recommendAnswer struct {
	Goal    string        `json:"goal"`
	Machine string        `json:"machine"`
	Rows    []catalog.Row `json:"configurations"`
}

func TestRecommend(t *testing.T) {
	h := newTestHandler(t, nil)
	tests := []struct {
		query   string
		goal    string
		machine string
		check   func(t *testing.T, rows []catalog.Row)
	}{
		{"machine=rtx-4090&capability=embedding", "balanced", "rtx-4090", func(t *testing.T, rows []catalog.Row) {
			want := variantsWhere(t, func(e *catalog.Entry) bool { return slices.Contains(e.Capabilities, "embedding") })
			if len(rows) != want || want == 0 {
				t.Errorf("%d rows, want the catalog's %d embedding variants", len(rows), want)
			}
			for _, r := range rows {
				if !r.Enabled || r.Plan == nil || !slices.Contains(r.Plan.Flags, "--embedding") {
					t.Errorf("%s/%s: enabled %v, plan %+v, want a plan with --embedding", r.Entry, r.Quant, r.Enabled, r.Plan)
				}
			}
		}},
		{"machine=rtx-4090", "balanced", "rtx-4090", func(t *testing.T, rows []catalog.Row) {
			// embedding models and rerankers only when asked for
			if want := variantsWhere(t, func(e *catalog.Entry) bool { return !e.Embeds() }); len(rows) != want {
				t.Errorf("%d rows, want every one of the catalog's %d variants of generating models", len(rows), want)
			}
			if !rows[0].Enabled || rows[0].Rank != 1 || rows[0].Plan == nil || rows[0].Plan.Source != "search" {
				t.Errorf("first row %+v, want rank 1 with a searched plan", rows[0])
			}
		}},
		{"capability=vision,tools&goal=context&min_ctx=32768&parallel=2", "context", "this machine", func(t *testing.T, rows []catalog.Row) {
			if len(rows) == 0 {
				t.Fatal("no rows")
			}
			for _, r := range rows {
				if !slices.Contains(r.Capabilities, "vision") || !slices.Contains(r.Capabilities, "tools") || r.CtxTrained < 32768 {
					t.Errorf("%s/%s has %v and %d trained tokens, past the filters", r.Entry, r.Quant, r.Capabilities, r.CtxTrained)
				}
				if r.Enabled && r.Plan.Slots != 2 {
					t.Errorf("%s/%s planned for %d slots, want 2", r.Entry, r.Quant, r.Plan.Slots)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			status, _, body := do(t, h, "GET", "/api/recommend?"+tt.query, "", nil)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			got := decode[recommendAnswer](t, body)
			if got.Goal != tt.goal || got.Machine != tt.machine {
				t.Errorf("goal %q machine %q, want %q %q", got.Goal, got.Machine, tt.goal, tt.machine)
			}
			tt.check(t, got.Rows)
		})
	}
}

type modelsAnswer struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

// TestModels pins the listing: every variant exactly once on any machine,
// the ones a small machine cannot run disabled with the domain that is
// short, and more available on a large machine.
func TestModels(t *testing.T) {
	h := newTestHandler(t, nil)
	available := map[string]int{}
	for _, machine := range []string{"cpu-32", "rtx-4090", "m4-max-128"} {
		t.Run(machine, func(t *testing.T) {
			status, _, body := do(t, h, "GET", "/v1/models?machine="+machine, "", nil)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			got := decode[modelsAnswer](t, body)
			if got.Object != "list" {
				t.Errorf("object %q, want list", got.Object)
			}
			seen := map[string]int{}
			for _, m := range got.Data {
				seen[m.ID]++
				if m.Object != "model" || m.OwnedBy != "headroom" || m.Created != 0 {
					t.Errorf("%s: object %q owned_by %q, want OpenAI's model object", m.ID, m.Object, m.OwnedBy)
				}
				switch m.Status {
				case "available":
					available[machine]++
					if m.DisabledReason != "" || m.Verdict != plan.Fits || m.Rank < 1 {
						t.Errorf("%s: available with verdict %q, disabled_reason %q, rank %d", m.ID, m.Verdict, m.DisabledReason, m.Rank)
					}
				case "disabled":
					if m.Reason == "" {
						t.Errorf("%s: disabled without a reason", m.ID)
					}
					if m.DisabledReason == disabledResources && !strings.Contains(m.Reason, "short by") {
						t.Errorf("%s: reason %q does not say which domain is short by how much", m.ID, m.Reason)
					}
				default:
					t.Errorf("%s: status %q", m.ID, m.Status)
				}
			}
			cat, _ := catalog.Load()
			for _, e := range cat.Entries {
				for _, v := range e.Variants {
					if id := catalog.VariantKey(e.ID, v.Quant); seen[id] != 1 {
						t.Errorf("%s listed %d times, want once", id, seen[id])
					}
				}
			}
			if len(got.Data) != variantCount(t) {
				t.Errorf("%d models, want the catalog's %d variants", len(got.Data), variantCount(t))
			}
			if machine == "cpu-32" {
				i := slices.IndexFunc(got.Data, func(m modelObject) bool { return m.ID == "qwen3-235b-a22b/Q8_0" })
				if m := got.Data[i]; m.Status != "disabled" || m.DisabledReason != disabledResources || !strings.Contains(m.Reason, "ram (system RAM) is short by") {
					t.Errorf("qwen3-235b-a22b/Q8_0 on a 32 GB laptop: %+v, want disabled for insufficient resources in ram", m)
				}
			}
		})
	}
	if available["cpu-32"] >= available["m4-max-128"] || available["cpu-32"] == 0 {
		t.Errorf("available: %v; want some on the laptop and more on the 128 GB machine", available)
	}
}

// TestModelsFiltered pins that a variant the recommendation leaves out is
// still listed, disabled.
func TestModelsFiltered(t *testing.T) {
	cat, _ := catalog.Load()
	snap, _ := hw.LoadMachine("rtx-4090")
	rows := []catalog.Row{{Entry: "qwen3-8b", Quant: "Q4_K_M", Verdict: plan.Fits, Enabled: true, Rank: 1}}
	got := listModels(cat, rows, snap, catalog.DefaultOptions())
	if len(got.Data) != variantCount(t) || got.Data[0].ID != "qwen3-8b/Q4_K_M" || got.Data[0].Status != "available" {
		t.Fatalf("%d models, first %+v; want every variant, the given row first", len(got.Data), got.Data[0])
	}
	for _, m := range got.Data[1:] {
		if m.Status != "disabled" || m.DisabledReason != disabledFiltered || !strings.Contains(m.Reason, "4096") {
			t.Errorf("%s: %+v, want disabled as filtered, saying the context asked for", m.ID, m)
		}
	}
}

func TestPanelFiles(t *testing.T) {
	h := newTestHandler(t, nil)
	for _, tt := range []struct{ path, contentType, has string }{
		{"/", "text/html", `<script src="app.js"`},
		{"/?machine=rtx-4090&model=qwen3-8b/Q4_K_M", "text/html", `id="assessment"`},
		{"/app.js", "text/javascript", "/api/fit"},
		{"/style.css", "text/css", "#3b82f6"},
	} {
		status, header, body := do(t, h, "GET", tt.path, "", nil)
		if status != 200 || !strings.HasPrefix(header.Get("Content-Type"), tt.contentType) || !bytes.Contains(body, []byte(tt.has)) {
			t.Errorf("%s: status %d, %q, want %s containing %q", tt.path, status, header.Get("Content-Type"), tt.contentType, tt.has)
		}
		if !strings.Contains(header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("%s: no policy keeping the panel to this server", tt.path)
		}
		if bytes.Contains(body, []byte("http://")) || bytes.Contains(body, []byte("https://")) {
			t.Errorf("%s refers to another site", tt.path)
		}
	}
	if status, _, _ := do(t, h, "GET", "/missing.js", "", nil); status != 404 {
		t.Errorf("/missing.js: status %d, want 404", status)
	}
}
