// Command quantcheck compares synth's quantization recipes with
// llama.cpp's own quantizer. For each shape it writes the F16 synth file (a
// sparse hole, no disk), asks llama-quantize which type it gives every
// tensor under each quant, and compares with the header synth.Build writes
// for that quant. The catalog's derived sizes come from those recipes, so a
// disagreement here is a wrong size there.
//
//	go run ./conformance/cmd/quantcheck qwen3-8b llama-3.2-1b
//	go run ./conformance/cmd/quantcheck -quants Q4_K_M,Q8_0 -json report.json all
//	go run ./conformance/cmd/quantcheck -golden synth/testdata/quantizer.txt all
//
// By default llama-quantize runs with --dry-run: it decides every type as a
// real run does (the same llama_tensor_get_type pass) but writes nothing,
// so even a 70B shape takes a second. -write quantizes for real and reads
// the output's header with package gguf instead; it reads the zeros of the
// sparse input and writes the whole output (about 5 GB for an 8B at
// Q4_K_M), which is deleted as soon as its header is read.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/headroom-llm/headroom/synth"
)

func main() {
	bin := flag.String("quantize", "", "llama-quantize binary (default: the one in the folder `conformance/engine.sh cpu` prints)")
	quants := flag.String("quants", "Q4_K_M,Q5_K_M,Q6_K,Q8_0", "comma-separated recipes to compare")
	threads := flag.Int("threads", 2, "threads llama-quantize may use with -write")
	write := flag.Bool("write", false, "quantize for real and read the output header, instead of --dry-run")
	dir := flag.String("dir", "", "folder for the temporary files (default: a new temp folder, removed at the end)")
	jsonOut := flag.String("json", "", "write the full report as JSON to this file")
	golden := flag.String("golden", "", "write the quantizer's types as synth's golden file to this path")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: quantcheck [flags] SHAPE... (or all)\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(options{
		bin: *bin, quants: *quants, threads: *threads, write: *write,
		dir: *dir, jsonOut: *jsonOut, golden: *golden, shapes: flag.Args(),
	}, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quantcheck:", err)
		os.Exit(1)
	}
}

type options struct {
	bin, quants     string
	threads         int
	write           bool
	dir             string
	jsonOut, golden string
	shapes          []string
}

func run(o options, w io.Writer) error {
	shapes, err := shapeList(o.shapes)
	if err != nil {
		return err
	}
	var quants []synth.Quant
	for _, s := range strings.Split(o.quants, ",") {
		q, err := synth.ParseQuant(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		if q == synth.F16 {
			return fmt.Errorf("F16 is the input, not a recipe to compare")
		}
		quants = append(quants, q)
	}
	if o.bin == "" {
		if o.bin, err = engineQuantize(); err != nil {
			return err
		}
	}
	if o.dir == "" {
		if o.dir, err = os.MkdirTemp("", "quantcheck-"); err != nil {
			return err
		}
		defer os.RemoveAll(o.dir)
	}
	q := quantizer{bin: o.bin, dir: o.dir, threads: o.threads, write: o.write}
	var results []result
	for _, name := range shapes {
		rs, err := checkShape(q, name, quants)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for _, r := range rs {
			r.print(w)
			results = append(results, r)
		}
	}
	summary(w, results)
	if o.jsonOut != "" {
		data, err := json.MarshalIndent(results, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonOut, append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	if o.golden != "" {
		f, err := os.Create(o.golden)
		if err != nil {
			return err
		}
		if err := writeGolden(f, q.bin, results); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	return nil
}

// shapeList expands "all" and checks every name before anything is written.
func shapeList(args []string) ([]string, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("name the shapes to check, or all (have %s)", strings.Join(synth.Names(), ", "))
	}
	var out []string
	for _, a := range args {
		if a == "all" {
			out = append(out, synth.Names()...)
			continue
		}
		if _, ok := synth.Lookup(a); !ok {
			return nil, fmt.Errorf("unknown shape %q (have %s)", a, strings.Join(synth.Names(), ", "))
		}
		out = append(out, strings.ToLower(a))
	}
	return out, nil
}

// engineQuantize finds llama-quantize in the engine build the conformance
// suite measures with, so the rules compared are the measured engine's.
func engineQuantize() (string, error) {
	cmd := exec.Command("conformance/engine.sh", "cpu")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("conformance/engine.sh cpu (run from the repository root, or pass -quantize): %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "llama-quantize"), nil
}

// checkShape writes the F16 input once and compares every quant on it.
func checkShape(q quantizer, name string, quants []synth.Quant) ([]result, error) {
	s, _ := synth.Lookup(name)
	in := filepath.Join(q.dir, name+".F16.gguf")
	b, err := synth.Build(s, synth.F16)
	if err != nil {
		return nil, err
	}
	if err := b.WriteFile(in); err != nil {
		return nil, err
	}
	defer os.Remove(in)
	var out []result
	for _, quant := range quants {
		want, err := synth.Build(s, quant)
		if err != nil {
			return nil, err
		}
		f, err := want.Layout()
		if err != nil {
			return nil, err
		}
		r := result{Shape: name, Quant: string(quant)}
		got, err := q.types(in, string(quant))
		if err != nil {
			r.Error = err.Error()
		} else {
			r.compare(got, f.Tensors)
		}
		out = append(out, r)
	}
	return out, nil
}
