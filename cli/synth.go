package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/synth"
)

func runSynth(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "synth", "[--quant Q4_K_M] [--weights zero] SHAPE OUTPUT.gguf", `
Writes a GGUF file shaped like a real model: its exact tensor names and
shapes, a realistic quantization mix, its hyperparameters and a vocabulary
of the real size. By default the weights are a sparse hole, so a 70B-shaped
file of 40 GiB takes a few MiB of disk. llama.cpp loads such files, which
makes them good for testing headroom's arithmetic and for trying the
commands.

--weights chooses what the weights hold:
  zero    all a hole (all zeros when read): for memory and loading tests.
          ggml's matrix kernels take as long on zeros as on real weights,
          but a mixture-of-experts router then ties on every token, so
          every token picks the same experts and prompt processing reads
          far fewer expert weights than the real model does.
  routed  random token embedding, norms and routers, the rest a hole: each
          token picks its own experts, as in a real model, while the file
          stays nearly as small on disk. For timing MoE models.
  random  every tensor random: the full size on disk, to compare the two
          others with (conformance/twinspeed.sh times all three).
Random weights are valid for ggml (finite, no subnormals, about 0.02 in
size, norms about 1) and the same for the same --seed.

`+wrap("Shapes: "+strings.Join(synth.Names(), ", "), "", "  ", textWidth)+`

Example:
  headroom synth llama-3.1-70b /tmp/llama-70b.gguf
  headroom inspect /tmp/llama-70b.gguf
  headroom synth --as ernie4_5 llama-3.2-1b /tmp/ernie-shaped.gguf
  headroom synth --weights routed --layers 8 qwen3-30b-a3b /tmp/a3b-8.gguf`)
	quant := fs.String("quant", "Q4_K_M", "quantization recipe: F16, Q8_0, Q4_K_M, Q5_K_M, Q6_K or MXFP4_MOE (experts in MXFP4, as gpt-oss ships)")
	list := fs.Bool("list", false, "list the shapes and where their figures come from")
	as := fs.String("as", "", "write the shape under another llama.cpp `architecture` name whose tensors and keys are the same (e.g. a llama shape as ernie4_5): a file of an architecture headroom does not model, which it answers for through llama.cpp's projection")
	weights := fs.String("weights", "zero", "what the weights hold: zero, routed or random (see above)")
	seed := fs.Uint64("seed", 1, "seed of the random weights")
	layers := fs.Int("layers", 0, "keep only the first `N` layers (0: all): the same tensors per layer at a fraction of the size; keep a shape's layer pattern whole")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if *list {
		for _, n := range synth.Names() {
			s, _ := synth.Lookup(n)
			head := fmt.Sprintf("%-19s %-10s %3d layers  ", n, s.Arch, s.Layers)
			fmt.Fprintln(env.Stdout, wrap("from "+s.Source, head, strings.Repeat(" ", len(head)), textWidth))
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
	w, err := synth.ParseWeights(*weights)
	if err != nil {
		return usageError{err.Error()}
	}
	if *layers != 0 {
		if shape, err = shape.FirstLayers(*layers); err != nil {
			return usageError{err.Error()}
		}
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
	if w != synth.WeightsZero {
		if err := synth.FillFile(ctx, pos[1], f, w.Selects, *seed); err != nil {
			os.Remove(pos[1])
			return err
		}
	}
	fmt.Fprintf(env.Stdout, "wrote %s: %s %s, %d tensors, %s (%s; header %s)\n",
		pos[1], shape.Name, q, len(f.Tensors), bytesIEC(f.Size), filled(w, f), bytesIEC(f.DataOffset))
	return nil
}

// filled says how much of the file holds data rather than a hole.
func filled(w synth.Weights, f *gguf.File) string {
	switch w {
	case synth.WeightsZero:
		return "sparse"
	case synth.WeightsRandom:
		return "random weights"
	}
	var n uint64
	for _, t := range f.Tensors {
		if w.Selects(t.Name) {
			n += t.Size
		}
	}
	return fmt.Sprintf("%s of routing weights, the rest sparse", bytesIEC(int64(n)))
}
