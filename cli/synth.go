package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/headroom-llm/headroom/synth"
)

func runSynth(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "synth", "[--quant Q4_K_M] SHAPE OUTPUT.gguf", `
Writes a GGUF file shaped like a real model: its exact tensor names and
shapes, a realistic quantization mix, its hyperparameters and a vocabulary
of the real size. The weights are a sparse hole, so a 70B-shaped file of
40 GiB takes a few MiB of disk. llama.cpp loads such files, which makes them
good for testing headroom's arithmetic and for trying the commands.

Shapes: `+strings.Join(synth.Names(), ", ")+`

Example:
  headroom synth llama-3.1-70b /tmp/llama-70b.gguf
  headroom inspect /tmp/llama-70b.gguf
  headroom synth --as ernie4_5 llama-3.2-1b /tmp/ernie-shaped.gguf`)
	quant := fs.String("quant", "Q4_K_M", "quantization recipe: F16, Q8_0, Q4_K_M, Q5_K_M, Q6_K or MXFP4_MOE (experts in MXFP4, as gpt-oss ships)")
	list := fs.Bool("list", false, "list the shapes and where their figures come from")
	as := fs.String("as", "", "write the shape under another llama.cpp `architecture` name whose tensors and keys are the same (e.g. a llama shape as ernie4_5): a file of an architecture headroom does not model, which it answers for through llama.cpp's projection")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if *list {
		for _, n := range synth.Names() {
			s, _ := synth.Lookup(n)
			fmt.Fprintf(env.Stdout, "%-16s %-8s %3d layers  from %s\n", n, s.Arch, s.Layers, s.Source)
		}
		return nil
	}
	if len(pos) != 2 {
		return usagef("need a shape and an output file, got %d arguments", len(pos))
	}
	shape, ok := synth.Lookup(pos[0])
	if !ok {
		return usagef("unknown shape %q (have %s)", pos[0], strings.Join(synth.Names(), ", "))
	}
	q, err := synth.ParseQuant(*quant)
	if err != nil {
		return usageError{err.Error()}
	}
	b, err := synth.Build(shape, q)
	if err != nil {
		return err
	}
	if *as != "" {
		if err := b.RenameArchitecture(*as); err != nil {
			return usageError{err.Error()}
		}
	}
	if err := b.WriteFile(pos[1]); err != nil {
		return err
	}
	f, err := b.Layout()
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "wrote %s: %s %s, %d tensors, %s (sparse; header %s)\n",
		pos[1], shape.Name, q, len(f.Tensors), bytesIEC(f.Size), bytesIEC(f.DataOffset))
	return nil
}
