package cli

import (
	"encoding/json"
	"testing"

	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/internal/synth"
)

// fit --verify asks the engine's own llama-fit-params for its projection
// of the load and compares it row by row: TinyLlama agrees on every row
// (the mapped tensors used in place, the repacked copy, KV and compute
// with one output row per batch token, as the projection's context
// makes them). Gemma 3n is the case where llama.cpp's projection and its
// real load part: it creates the tied output before the embedding, so
// the projection counts the embedding twice in the host's model row
// while the real load maps it once (its logged CPU_Mapped buffer, in the
// goldens, is what headroom gives); the check must say it differs there
// and only there.
func TestLiveFitVerify(t *testing.T) {
	bin := liveEngine(t)
	dir := t.TempDir()
	check := func(shape string, q synth.Quant) engine.Check {
		t.Helper()
		path := writeShape(t, dir, shape, q)
		code, out, errs := run(t, "fit", "--quiet", "--json", "--verify", "--llama-server", bin, "--machine", "cpu-32", path, "-c", "4096", "-np", "1")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", shape, code, errs)
		}
		var f struct {
			Check *engine.Check `json:"engine_check"`
		}
		if err := json.Unmarshal([]byte(out), &f); err != nil || f.Check == nil {
			t.Fatalf("%s: no engine_check (%v): %s", shape, err, out)
		}
		return *f.Check
	}
	if c := check("tinyllama-1.1b", synth.Q4_K_M); !c.Agrees {
		t.Errorf("tinyllama: %+v", c.Cells)
	}
	c := check("gemma-3n-e2b", synth.Q8_0)
	if c.Agrees {
		t.Fatalf("gemma-3n agrees: %+v", c.Cells)
	}
	for _, cell := range c.Cells {
		differs := cell.Row == "Host" && cell.Part == "model"
		if cell.Agrees == differs {
			t.Errorf("gemma-3n %+v", cell)
		}
		// 544 MiB of Q8_0 embedding, give or take the rounding down of
		// each side.
		if d := cell.Engine - cell.Headroom; differs && (d < 543 || d > 545) {
			t.Errorf("gemma-3n's projection counts %d MiB more, want the 544 MiB embedding", d)
		}
	}
}
