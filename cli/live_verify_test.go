package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/source/hubtest"
	"github.com/headroom-llm/headroom/synth"
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

// A Hub model is checked before any byte of its weights moves: the
// projection runs on a sparse twin of its header, which is gone after.
func TestLiveFitVerifyRemote(t *testing.T) {
	bin := liveEngine(t)
	hub := hubtest.New(t)
	hub.AddGGUF(t, "test/tiny-GGUF", "TinyLlama-Q4_K_M.gguf", "tinyllama-1.1b", synth.Q4_K_M, true)
	s := newSession(t, hub)
	tmp := t.TempDir()
	s.vars["TMPDIR"] = tmp
	t.Setenv("TMPDIR", tmp)
	// A plain fit reads the header (its first range request reads ahead
	// by a window); the check must not read more than that.
	if code, _, errs := s.run("fit", "--quiet", "--machine", "cpu-32", "hf:test/tiny-GGUF/TinyLlama-Q4_K_M.gguf", "-c", "4096", "-np", "1"); code != 0 {
		t.Fatalf("plain fit: exit %d: %s", code, errs)
	}
	hub.Quiet() // the read-ahead's last bytes may still be on their way
	before, _, _ := hub.Served("test/tiny-GGUF", "TinyLlama-Q4_K_M.gguf")
	code, out, errs := s.run("fit", "--quiet", "--json", "--verify", "--llama-server", bin, "--machine", "cpu-32",
		"hf:test/tiny-GGUF/TinyLlama-Q4_K_M.gguf", "-c", "4096", "-np", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var f struct {
		Check *engine.Check `json:"engine_check"`
	}
	if err := json.Unmarshal([]byte(out), &f); err != nil || f.Check == nil || !f.Check.Agrees {
		t.Fatalf("check %+v (%v): %s", f.Check, err, out)
	}
	hub.Quiet()
	if after, _, _ := hub.Served("test/tiny-GGUF", "TinyLlama-Q4_K_M.gguf"); after != before {
		t.Errorf("the check had %d more bytes of the file served (the header was cached)", after-before)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "headroom-twin-*")); len(left) != 0 {
		t.Errorf("twins left behind: %q", left)
	}
}

// Given a build whose rules differ, the check says where: llama.cpp
// de3ff81 leaves GLM-4.5-Air's NextN layer out of its KV cache (46 cache
// layers, not 47), so its projection's host context is 736 MiB at 4096
// cells. Told that build (its llama-server asked for --version), headroom
// applies its rule and agrees on every row; told 80fb11a's rules
// (--engine 80fb11a) beside that build, it counts 752 and the check says
// the context row differs, and only that row. It runs where
// HEADROOM_LLAMA_SERVER_DE3FF81 names that build (conformance/engine.sh
// cpu --node-llama-cpp 3.22.1).
func TestLiveFitVerifyOtherBuild(t *testing.T) {
	bin := os.Getenv("HEADROOM_LLAMA_SERVER_DE3FF81")
	if bin == "" {
		t.Skip("HEADROOM_LLAMA_SERVER_DE3FF81 names no llama-server of llama.cpp de3ff81")
	}
	path := writeShape(t, t.TempDir(), "glm-4.5-air", synth.Q4_K_M)
	check := func(extra ...string) (engine.Check, engine.EngineNote) {
		t.Helper()
		args := append([]string{"fit", "--quiet", "--json", "--verify", "--llama-server", bin, "--machine", "cpu-32", path, "-c", "4096", "-np", "1"}, extra...)
		code, out, errs := run(t, args...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var f struct {
			Check  *engine.Check      `json:"engine_check"`
			Engine *engine.EngineNote `json:"engine"`
		}
		if err := json.Unmarshal([]byte(out), &f); err != nil || f.Check == nil || f.Engine == nil {
			t.Fatalf("%v: %s", err, out)
		}
		return *f.Check, *f.Engine
	}
	c, note := check()
	if !c.Agrees || !note.Rules.NextNWithoutKV || note.Exact {
		t.Errorf("de3ff81's rules: %+v, %+v", c.Cells, note)
	}
	c, _ = check("--engine", "80fb11a")
	for _, cell := range c.Cells {
		differs := cell.Row == "Host" && cell.Part == "context"
		if cell.Agrees == differs || differs && (cell.Engine != 736 || cell.Headroom != 752) {
			t.Errorf("80fb11a's rules beside de3ff81: %+v", cell)
		}
	}
}

// TestLiveFitVerifyProfiles: fit --verify agrees with llama.cpp's own
// projection on the profiles fit's flags produce, its defaults first
// (llama-server's -np auto: four slots of one unified cache, whose -kvu
// llama-fit-params does not take), passed-through and serving flags
// among them (llama-fit-params is given only what its table takes).
func TestLiveFitVerifyProfiles(t *testing.T) {
	bin := liveEngine(t)
	dir := t.TempDir()
	tiny := writeShape(t, dir, "tinyllama-1.1b", synth.Q4_K_M)
	gemma := writeShape(t, dir, "gemma-3-1b", synth.Q4_K_M)
	for _, tc := range []struct {
		model string
		args  []string
	}{
		{tiny, nil},
		{tiny, []string{"-c", "8192"}},
		{tiny, []string{"-c", "4096", "-np", "2"}},
		{tiny, []string{"-c", "4096", "--no-kv-unified"}},
		{tiny, []string{"-c", "4096", "-ctk", "q8_0", "-ctv", "q8_0", "-fa", "on"}},
		{tiny, []string{"-c", "4096", "-fa", "off", "-b", "1024", "-ub", "256"}},
		{tiny, []string{"-c", "4096", "--no-mmap"}},
		{tiny, []string{"-c", "4096", "-nkvo"}},
		{tiny, []string{"-c", "4096", "-cram", "0", "-ctxcp", "4", "--jinja", "--api-key", "k", "-t", "2", "--port", "9999"}},
		{gemma, nil},
		{gemma, []string{"-c", "8192", "--swa-full"}},
	} {
		args := append([]string{"fit", "--quiet", "--json", "--verify", "--llama-server", bin, "--machine", "cpu-32", tc.model}, tc.args...)
		code, out, errs := run(t, args...)
		name := filepath.Base(tc.model) + " " + strings.Join(tc.args, " ")
		if code != 0 {
			t.Errorf("%s: exit %d: %s", name, code, errs)
			continue
		}
		var f struct {
			Check *engine.Check `json:"engine_check"`
		}
		if err := json.Unmarshal([]byte(out), &f); err != nil || f.Check == nil {
			t.Errorf("%s: no engine_check (%v): %s", name, err, out)
			continue
		}
		if !f.Check.Agrees {
			t.Errorf("%s: llama.cpp's projection differs: %+v", name, f.Check.Cells)
		}
	}
}
