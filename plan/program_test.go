package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/synth"
)

// TestProgramRules holds each program to the rules read from llama.cpp:
// its output rows, default sequences, unified cache and sliding-window
// caches, and the command it prints.
func TestProgramRules(t *testing.T) {
	m := model(t, "llama-3.1-8b", synth.Q4_K_M)
	cpu := Device{Name: "CPU", Backend: "CPU"}
	for _, tc := range []struct {
		program     Program
		outputs     int // n_outputs_max for -np 2 -b 2048
		parallel    int
		unified     bool
		swaFull     bool
		commandHead string
		batchRows   bool
	}{
		{"", 2, 4, true, false, "llama-server", false},
		{ProgramServer, 2, 4, true, false, "llama-server", false},
		{ProgramCLI, 2, 1, false, false, "llama-cli", false},
		{ProgramCompletion, 2048, 1, false, false, "llama-completion", true},
		{ProgramLibrary, 2048, 1, false, true, "library:", true},
	} {
		d := tc.program.Defaults()
		if d.Parallel != tc.parallel || d.KVUnified != tc.unified || d.SWAFull != tc.swaFull {
			t.Errorf("%q defaults: -np %d, unified %v, swa_full %v; want %d, %v, %v", tc.program, d.Parallel, d.KVUnified, d.SWAFull, tc.parallel, tc.unified, tc.swaFull)
		}
		if tc.program.BatchOutputs() != tc.batchRows {
			t.Errorf("%q: BatchOutputs %v", tc.program, !tc.batchRows)
		}
		p := Defaults()
		p.Program, p.Ctx, p.Parallel, p.GPULayers = tc.program, 8192, 2, 0
		c, err := resolveContext(p, m, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.NOutputsMax != tc.outputs {
			t.Errorf("%q: n_outputs_max %d, want %d", tc.program, c.NOutputsMax, tc.outputs)
		}
		cmd := p.Command([]string{"-m", "x.gguf"})
		if cmd[0] != tc.commandHead {
			t.Errorf("%q: command %v", tc.program, cmd)
		}
		if tc.program == ProgramLibrary {
			for _, want := range []string{"n_ctx=8192", "n_seq_max=2", "n_batch=2048", "n_ubatch=512", "n_gpu_layers=0", "swa_full=false"} {
				if !slices.Contains(cmd, want) {
					t.Errorf("library command %v lacks %s", cmd, want)
				}
			}
		} else if !slices.Contains(cmd, "--fit") || cmd[1] != "-m" {
			t.Errorf("%q: command %v names no model or leaves llama.cpp's fit on", tc.program, cmd)
		}
		// The larger output rows cost compute memory: a library context of
		// this model needs more than llama-server's for the same flags.
		r, err := Account(m, p, cpu, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := p
		srv.Program = ProgramServer
		rs, err := Account(m, srv, cpu, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, base := computeBytes(r), computeBytes(rs); tc.batchRows != (got > base) {
			t.Errorf("%q: compute %d bytes, llama-server's %d", tc.program, got, base)
		}
	}
}

func computeBytes(r *Result) int64 {
	var n int64
	for _, b := range r.Buffers {
		if b.Kind == KindCompute {
			n += b.Bytes
		}
	}
	return n
}

// TestProgramCheck refuses what a program does not take.
func TestProgramCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Profile)
		want string // "" for none
	}{
		{"server -kvu", func(p *Profile) { p.KVUnified = true }, ""},
		{"cli -kvu", func(p *Profile) { p.Program, p.KVUnified = ProgramCLI, true }, "takes no -kvu"},
		{"completion -kvu", func(p *Profile) { p.Program, p.KVUnified = ProgramCompletion, true }, "takes no -kvu"},
		{"library kv_unified", func(p *Profile) { p.Program, p.KVUnified = ProgramLibrary, true }, ""},
		{"cli draft", func(p *Profile) { p.Program, p.Companions = ProgramCLI, &Companions{} }, ""},
		{"completion draft", func(p *Profile) { p.Program, p.Companions = ProgramCompletion, &Companions{} }, "no projector or draft"},
		{"library draft", func(p *Profile) { p.Program, p.Companions = ProgramLibrary, &Companions{} }, "no projector or draft"},
		{"library ncmoe", func(p *Profile) { p.Program, p.CPUMoE = ProgramLibrary, 4 }, "no --n-cpu-moe"},
	} {
		p := Defaults()
		tc.edit(&p)
		err := p.Check()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func FuzzParseProgram(f *testing.F) {
	for _, s := range []string{"", "llama-server", "llama-cli", "library", "llama-completion", "LLAMA-CLI", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseProgram(s)
		if err != nil {
			return
		}
		if s != "" && string(p) != s || !slices.Contains(Programs(), p) {
			t.Errorf("%q parsed as %q", s, p)
		}
	})
}
