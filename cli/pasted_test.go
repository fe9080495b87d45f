package cli

import (
	"slices"
	"strings"
	"testing"
)

// A pasted llama-server command line becomes headroom's: the program and
// -m go, the model stays, flags without effect on memory are set apart.
func TestPasted(t *testing.T) {
	fs := newFlags(Env{}, "fit", "", "")
	fs.Int("c", 0, "")
	fs.Int("port-ish", 0, "")
	fs.Bool("mlock", false, "")
	for _, tc := range []struct {
		in, out, ignored string
		err              string
	}{
		{"-- llama-server -m m.gguf -c 2048", "m.gguf -c 2048", "", ""},
		{"-- /opt/llama.cpp/build/bin/llama-server --model=m.gguf -t 8", "m.gguf", "-t 8", ""},
		{"-m m.gguf --port 8080 --host 0.0.0.0 --jinja --temp=0.7 -c 4096", "m.gguf -c 4096", "--port 8080 --host 0.0.0.0 --jinja --temp 0.7", ""},
		{"-hf ggml-org/gemma-3-1b-it-GGUF:Q4_K_M", "hf:ggml-org/gemma-3-1b-it-GGUF:Q4_K_M", "", ""},
		{"m.gguf --port-ish 3", "m.gguf --port-ish 3", "", ""}, // headroom's own flag wins
		{"m.gguf --bogus 3", "m.gguf --bogus 3", "", ""},       // left to the flag parser to refuse
		{"-m m.gguf --mlock", "m.gguf --mlock", "", ""},        // fit's own flag since it is accounted
		{"-m m.gguf --lora a.gguf", "", "", "--lora: adds weights (LoRA adapters"},
		{"-m", "", "", "-m takes a value (FNAME)"},
		// -hff names a file of -hf's repository, overriding its quant.
		{"-- llama-server -hf o/r-GGUF:Q4_K_M -hff r-IQ1_M.gguf -c 2048", "hf:o/r-GGUF/r-IQ1_M.gguf -c 2048", "", ""},
		{"-- llama-server -hff r.gguf -hf o/r", "hf:o/r/r.gguf", "", ""},
		{"-- llama-server -m m.gguf -hff r.gguf", "", "", "no -hf was given"},
		// A value of headroom's own flag is taken whole, as llama-server
		// takes it, even where it looks like a flag.
		{"-- llama-server -c -m m.gguf", "-c -m m.gguf", "", ""},
		{"-- llama-server --mlock -m m.gguf", "--mlock m.gguf", "", ""},
		// The environment of a pasted line is not applied; a line with no
		// model is llama-server's router.
		{"-- CUDA_VISIBLE_DEVICES=1 llama-server -m m.gguf", "", "", "CUDA_VISIBLE_DEVICES=1 sets llama-server's environment"},
		{"-- llama-server --port 8080", "", "", "llama-server with no model (-m, -hf): starts llama-server's router"},
		{"-- llama-server --models-dir d", "", "", "--models-dir: starts llama-server's router"},
		{"m.gguf -- llama-server -c 2048", "m.gguf -c 2048", "", ""},
	} {
		err := fs.split(strings.Fields(tc.in))
		out, ignored := fs.line.Own, fs.line.PassWords()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(out, " ") != tc.out || strings.Join(ignored, " ") != tc.ignored {
			t.Errorf("%q: %q, ignored %q, %v; want %q, %q", tc.in, out, ignored, err, tc.out, tc.ignored)
		}
	}
}

// llama.cpp's own examples of llama-server command lines (tools/server/
// README.md of the pinned build), with the model path swapped for a synth
// file, are accepted by fit as pasted; the flags without effect on memory
// are said as passed through.
func TestPastedServerExamples(t *testing.T) {
	model := synthFile(t, "qwen3-0.6b")
	for _, line := range []string{
		"llama-server -m MODEL -c 2048",
		"./llama-server -m MODEL -c 2048",
		"llama-server -m MODEL --port 8080",
		"llama-server -m MODEL --mcp-servers-config mcp.json",
		"llama-server -m MODEL --ui-config {\"pasteLongTextToFileLen\":0}",
	} {
		args := append([]string{"fit", "--quiet", "--machine", "cpu-32", "--"}, strings.Fields(strings.ReplaceAll(line, "MODEL", model))...)
		code, out, errs := run(t, args...)
		if code != 0 || !strings.Contains(out, "verdict  fits") {
			t.Errorf("%s: exit %d\n%s\n%s", line, code, out, errs)
		}
		if strings.Contains(line, "--port") && !strings.Contains(errs, "passed through to llama-server (no effect on memory): --port 8080") {
			t.Errorf("%s: the ignored flag is not said: %s", line, errs)
		}
	}
}

// -ngl pasted for a machine without a GPU is said to do nothing, not
// passed over in silence, by fit and plan alike, and both print -ngl 0
// there; on a machine with one neither says anything of the kind.
func TestGPULayersWithoutGPU(t *testing.T) {
	model := synthFile(t, "qwen3-0.6b")
	for machine, said := range map[string]bool{"cpu-32": true, "rtx-4090": false} {
		code, out, errs := run(t, "fit", "--quiet", "--machine", machine, "--", "llama-server", "-m", model, "-c", "4096", "-ngl", "999")
		if code != 0 || strings.Contains(out, "-ngl has no effect") != said {
			t.Errorf("%s: exit %d, said %v, want %v\n%s%s", machine, code, !said, said, out, errs)
		}
		code, out2, errs2 := run(t, "plan", "--quiet", "--machine", machine, "--", "llama-server", "-m", model, "-ngl", "999")
		if code != 0 || strings.Contains(errs2, "-ngl has no effect") != said {
			t.Errorf("plan on %s: exit %d, said %v, want %v\n%s%s", machine, code, !said, said, out2, errs2)
		}
		// Without a GPU both print -ngl 0, given or not.
		for _, o := range []string{out, out2} {
			if said && !strings.Contains(o, " -ngl 0 ") {
				t.Errorf("%s: the command does not say -ngl 0:\n%s", machine, o)
			}
		}
	}
	if _, out, _ := run(t, "fit", "--quiet", "--machine", "cpu-32", model, "-c", "4096"); !strings.Contains(out, " -ngl 0 ") {
		t.Errorf("fit without -ngl on a machine without a GPU: want -ngl 0, as plan says:\n%s", out)
	}
}

// FuzzPasted: any pasted line is parsed or refused, never a panic, and
// parsing only takes words out or rewrites them in place: what it keeps
// and the flags it passes through are never more than it was given.
func FuzzPasted(f *testing.F) {
	for _, seed := range []string{
		"-- llama-server -m m.gguf -c 2048 --port 8080",
		"-- A=1 B=2 ./llama-server -hf o/r:Q4_K_M -hff f.gguf",
		"-- llama-server -fa -hf o/r --jinja",
		"-- llama-server --models-dir d",
		"--",
		"-- llama-server -hff",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		fs := newFlags(Env{}, "fit", "", "")
		fs.Int("c", 0, "")
		fs.String("fa", "", "")
		fs.Bool("mlock", false, "")
		in := strings.Fields(line)
		err := fs.split(slices.Clone(in))
		if err == nil && len(fs.line.Own)+len(fs.line.Pass) > len(in) {
			t.Errorf("%q: %d words out and %d passed from %d", line, len(fs.line.Own), len(fs.line.Pass), len(in))
		}
	})
}
