package graph

import (
	"testing"

	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/plan/ggml"
	"github.com/headroom-llm/headroom/synth"
)

// Builds before set_rows (without Rules.KVSetRows) write K and V with ggml_cpy into
// views of the cache: no index inputs, one copy per cache per layer, and
// the CPU compute buffer smaller by what the indices took. Builds before
// PR #6122 (without Rules.OutIDs) compute the last layer for every token.
func TestOlderBuildKVWrite(t *testing.T) {
	m, c, build, graph := ruleGraphs(t, "llama-3.2-1b", synth.Q8_0, 4096, false)
	count := func(r builds.Rules) (leafs map[string]int64, cpys, setRows, getRows int) {
		g := graph(r)
		leafs = map[string]int64{}
		for _, l := range g.Leafs() {
			leafs[l.Name] = ggml.Elems(l.Ne())
		}
		for _, n := range g.Nodes() {
			switch n.Op() {
			case ggml.Cpy:
				cpys++
			case ggml.SetRows:
				setRows++
			case ggml.GetRows:
				getRows++
			}
		}
		return leafs, cpys, setRows, getRows
	}
	kvCopy := measuredRules(t, "80fb11a", func(r *builds.Rules) { r.KVSetRows = false })
	noOutIDs := measuredRules(t, "80fb11a", func(r *builds.Rules) { r.OutIDs = false })
	now, cpys, setRows, getRowsNow := count(measuredRules(t, "80fb11a"))
	if cpys != 0 || setRows != 2*len(m.Layers) {
		t.Fatalf("set_rows graph: %d copies, %d set_rows; want 0 and %d", cpys, setRows, 2*len(m.Layers))
	}
	old, cpys, setRows, _ := count(kvCopy)
	if cpys != 2*len(m.Layers) || setRows != 0 {
		t.Errorf("ggml_cpy KV write: %d copies, %d set_rows; want %d and 0", cpys, setRows, 2*len(m.Layers))
	}
	for _, name := range []string{"k_idxs", "v_idxs"} {
		if _, ok := old[name]; ok {
			t.Errorf("ggml_cpy KV write: the graph still has %s", name)
		}
	}
	// A transposed V takes an I64 index per element: n_embd_v_gqa x
	// tokens.
	if want := int64(m.Layers[0].VDim) * int64(c.NUBatch); now["v_idxs"] != want {
		t.Fatalf("v_idxs has %d elements, want %d", now["v_idxs"], want)
	}
	idx := 8 * (now["k_idxs"] + now["v_idxs"])
	if got := cpuBytes(build, c, measuredRules(t, "80fb11a")) - cpuBytes(build, c, kvCopy); got != idx {
		t.Errorf("the ggml_cpy KV write saves %d bytes of CPU compute buffer, want the indices' %d", got, idx)
	}
	_, _, _, getRowsOld := count(noOutIDs)
	if now["inp_out_ids"] == 0 || getRowsNow-getRowsOld != 2 {
		t.Errorf("every row computed: %d get_rows, %d now; want the last layer's two fewer", getRowsOld, getRowsNow)
	}
	if old, _, _, _ := count(noOutIDs); old["inp_out_ids"] != 0 {
		t.Error("every row computed: the graph still has inp_out_ids")
	}
}
