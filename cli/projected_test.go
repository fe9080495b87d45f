package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/engine/enginetest"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/synth"
)

// writeShapeAs writes a synth shape under another architecture's name
// whose tensors and keys are the same (headroom synth --as).
func writeShapeAs(t *testing.T, dir, shape, as string, q synth.Quant) string {
	t.Helper()
	return writeSynth(t, dir, shape, as, q)
}

// Without a llama.cpp to ask, an architecture headroom does not model is
// incompatible, and the reason names the one thing that fixes it; one
// refused on purpose says why, whatever is installed.
func TestProjectedWithoutLlamaCpp(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no llama-fit-params on PATH
	dir := t.TempDir()
	path := writeShapeAs(t, dir, "tinyllama-1.1b", "ernie4_5", synth.Q4_K_M)
	code, out, _ := run(t, "fit", "--quiet", "--json", "--machine", "cpu-32", path, "-c", "4096", "-np", "1")
	if code != exitError {
		t.Fatalf("fit of an incompatible model: exit %d, want 1", code)
	}
	var f struct {
		Verdict, Reason string
	}
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		t.Fatal(err)
	}
	if f.Verdict != plan.Incompatible || !strings.Contains(f.Reason, "--llama-server") || !strings.Contains(f.Reason, "llama-fit-params") {
		t.Errorf("fit without llama.cpp: %s, %q", f.Verdict, f.Reason)
	}
	code, _, errs := run(t, "plan", "--quiet", "--machine", "cpu-32", path)
	// The verdict is wrapped for a terminal of 100 columns.
	errs = strings.Join(strings.Fields(errs), " ")
	if code != 1 || !strings.Contains(errs, "no llama.cpp was found to project it") {
		t.Errorf("plan without llama.cpp: exit %d, %s", code, errs)
	}
	refusedPath := writeShapeAs(t, dir, "tinyllama-1.1b", "t5", synth.Q4_K_M)
	code, _, errs = run(t, "plan", "--quiet", "--machine", "cpu-32", refusedPath)
	if code != 1 || !strings.Contains(errs, "encoder-decoder") {
		t.Errorf("plan of a refused architecture: exit %d, %s", code, errs)
	}
}

// An architecture llama.cpp loads and headroom does not model gets a
// verdict, a plan and a running server through the user's own
// llama.cpp's projection, each labelled as such, and llama-server then
// allocates no more than the projection said, buffer group by group
// (serve --check), at the plan's own profile and at a fixed one.
func TestLiveProjected(t *testing.T) {
	bin := liveEngine(t)
	dir := t.TempDir()
	path := writeShapeAs(t, dir, "tinyllama-1.1b", "ernie4_5", synth.Q8_0)

	code, out, errs := run(t, "fit", "--quiet", "--json", "--llama-server", bin, "--machine", "cpu-32", path, "-c", "8192", "-np", "2")
	if code != 0 {
		t.Fatalf("fit: exit %d: %s", code, errs)
	}
	var f struct {
		Verdict  string
		Warnings []string
		Buffers  []plan.Buffer
	}
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		t.Fatal(err)
	}
	if f.Verdict != plan.Fits || len(f.Warnings) == 0 || !strings.Contains(f.Warnings[0], "llama.cpp's own projection") {
		t.Errorf("fit: %s, warnings %q", f.Verdict, f.Warnings)
	}
	kinds := map[plan.BufferKind]bool{}
	for _, b := range f.Buffers {
		kinds[b.Kind] = true
		if b.Note == "" {
			t.Errorf("buffer %+v does not say where its figure comes from", b)
		}
	}
	for _, k := range []plan.BufferKind{plan.KindModel, plan.KindKV, plan.KindCompute, plan.KindOutput} {
		if !kinds[k] {
			t.Errorf("fit lists no %s buffer: %+v", k, f.Buffers)
		}
	}

	code, out, errs = run(t, "plan", "--quiet", "--json", "--llama-server", bin, "--machine", "cpu-32", path)
	if code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	var p struct {
		Verdict   string
		Projected string
		Chosen    *plan.Candidate
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if p.Verdict != plan.Fits || p.Chosen == nil || p.Projected == "" {
		t.Fatalf("plan: %+v", p)
	}

	for _, extra := range [][]string{nil, {"-c", "4096", "--parallel", "1"}} {
		var sout, serr bytes.Buffer
		env := liveEnv(t, &sout, &serr)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		args := append([]string{"serve", path, "--check", "--llama-server", bin}, extra...)
		code := Main(ctx, args, env)
		cancel()
		t.Logf("%v: exit %d\n%s", extra, code, sout.String())
		if code != 0 || !strings.Contains(sout.String(), "at or under llama.cpp's projection") {
			t.Errorf("serve --check %v: exit %d\n%s\n%s", extra, code, sout.String(), serr.String())
		}
		if strings.Contains(sout.String(), "OVER the projection") {
			t.Errorf("llama-server allocated more than the projection: %s", sout.String())
		}
	}

	// An architecture neither headroom nor this llama.cpp knows is
	// incompatible in llama.cpp's own words.
	unknown := writeShapeAs(t, dir, "tinyllama-1.1b", "futurenet", synth.Q8_0)
	code, out, _ = run(t, "fit", "--quiet", "--json", "--llama-server", bin, "--machine", "cpu-32", unknown, "-c", "4096", "-np", "1")
	var u struct{ Verdict, Reason string }
	if err := json.Unmarshal([]byte(out), &u); err != nil || code != exitError {
		t.Fatalf("fit of an unknown architecture: exit %d (want 1, incompatible), %v: %s", code, err, out)
	}
	if u.Verdict != plan.Incompatible || !strings.Contains(u.Reason, "projection failed") || !strings.Contains(u.Reason, "futurenet") {
		t.Errorf("unknown architecture: %s, %q", u.Verdict, u.Reason)
	}
	if _, err := os.Stat(path); err != nil {
		t.Error(err)
	}
}

// A projector or draft beside a model answered on llama.cpp's projection
// would go uncounted: it is refused, not ignored.
func TestProjectedRefusesCompanions(t *testing.T) {
	fake, _ := enginetest.FitParams(t, "")
	dir := t.TempDir()
	path := writeShapeAs(t, dir, "tinyllama-1.1b", "ernie4_5", synth.Q8_0)
	draft := writeShape(t, dir, "tinyllama-1.1b", synth.Q8_0)
	server := filepath.Join(filepath.Dir(fake), "llama-server")
	for _, cmd := range []string{"fit", "plan"} {
		code, _, errs := run(t, cmd, "--quiet", "--llama-server", server, "--machine", "cpu-32", path, "-md", draft)
		if code != 2 || !strings.Contains(errs, "would go uncounted") {
			t.Errorf("%s with -md beside a projected model: exit %d, %s", cmd, code, errs)
		}
	}
	// Without a companion the same projection answers.
	if code, out, errs := run(t, "fit", "--quiet", "--json", "--llama-server", server, "--machine", "cpu-32", path, "-c", "4096", "-np", "1"); code != 0 || !strings.Contains(out, `"fits"`) {
		t.Errorf("fit on the stand-in's projection: exit %d, %s %s", code, out, errs)
	}
}
