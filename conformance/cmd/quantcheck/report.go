package main

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/gguf"
)

// result is the comparison of one shape under one quant.
type result struct {
	Shape   string     `json:"shape"`
	Quant   string     `json:"quant"`
	Tensors int        `json:"tensors"`
	Equal   int        `json:"equal"`
	Diffs   []mismatch `json:"mismatches,omitempty"`
	Error   string     `json:"error,omitempty"`
	// quantizer holds the quantizer's types for the golden file.
	quantizer []tensorType
}

// mismatch is one tensor whose types differ. A missing side is "-".
type mismatch struct {
	Tensor    string `json:"tensor"`
	Quantizer string `json:"quantizer"`
	Synth     string `json:"synth"`
}

// compare matches the quantizer's types with synth's header by name; a
// tensor only one side has counts as a mismatch too.
func (r *result) compare(got []tensorType, synth []gguf.TensorInfo) {
	r.quantizer = got
	mine := map[string]gguf.GGMLType{}
	for _, t := range synth {
		mine[t.Name] = t.Type
	}
	seen := map[string]bool{}
	for _, t := range got {
		seen[t.Name] = true
		r.Tensors++
		s, ok := mine[t.Name]
		switch {
		case !ok:
			r.Diffs = append(r.Diffs, mismatch{t.Name, t.Type.String(), "-"})
		case s != t.Type:
			r.Diffs = append(r.Diffs, mismatch{t.Name, t.Type.String(), s.String()})
		default:
			r.Equal++
		}
	}
	for _, t := range synth {
		if !seen[t.Name] {
			r.Tensors++
			r.Diffs = append(r.Diffs, mismatch{t.Name, "-", t.Type.String()})
		}
	}
}

func (r result) print(w io.Writer) {
	if r.Error != "" {
		fmt.Fprintf(w, "%-20s %-7s refused: %s\n", r.Shape, r.Quant, r.Error)
		return
	}
	fmt.Fprintf(w, "%-20s %-7s %4d/%4d tensors agree\n", r.Shape, r.Quant, r.Equal, r.Tensors)
	for _, d := range r.Diffs {
		fmt.Fprintf(w, "    %-40s quantizer %-6s synth %s\n", d.Tensor, d.Quantizer, d.Synth)
	}
}

// summary prints the agreement as a markdown table, one row per shape.
func summary(w io.Writer, rs []result) {
	var quants []string
	cells := map[string]map[string]string{}
	var shapes []string
	for _, r := range rs {
		if !slices.Contains(quants, r.Quant) {
			quants = append(quants, r.Quant)
		}
		if cells[r.Shape] == nil {
			cells[r.Shape] = map[string]string{}
			shapes = append(shapes, r.Shape)
		}
		cell := fmt.Sprintf("%d/%d", r.Equal, r.Tensors)
		if r.Error != "" {
			cell = "refused"
		}
		cells[r.Shape][r.Quant] = cell
	}
	fmt.Fprintf(w, "\n| shape | %s |\n|---|%s\n", strings.Join(quants, " | "), strings.Repeat("---|", len(quants)))
	for _, s := range shapes {
		row := make([]string, len(quants))
		for i, q := range quants {
			row[i] = cells[s][q]
		}
		fmt.Fprintf(w, "| %s | %s |\n", s, strings.Join(row, " | "))
	}
}

// writeGolden writes the quantizer's types in the compact form
// synth's TestRecipesMatchQuantizer reads: a section per shape
// and quant, one line per tensor outside the blocks ("NAME TYPE") and one
// per block tensor name with the layer index replaced by '*', followed by
// runs of consecutive layers that share a type ("blk.*.attn_v.weight
// 0-2:Q6_K 3:Q4_K"). Refused quants are left out: there is nothing to pin.
func writeGolden(out io.Writer, bin string, rs []result) error {
	w := bufio.NewWriter(out)
	fmt.Fprintf(w, "# Tensor types llama-quantize (%s) chose for synth's F16 files.\n", filepath.Base(filepath.Dir(filepath.Dir(bin))))
	fmt.Fprintf(w, "# Written by go run ./conformance/cmd/quantcheck -golden; see docs/quantizer.md.\n")
	for _, r := range rs {
		if r.Error != "" {
			continue
		}
		fmt.Fprintf(w, "\n== %s %s\n", r.Shape, r.Quant)
		for _, line := range goldenLines(r.quantizer) {
			fmt.Fprintln(w, line)
		}
	}
	return w.Flush()
}

// goldenLines groups tensors as writeGolden describes, sorted by name.
func goldenLines(ts []tensorType) []string {
	type layerType struct {
		layer int
		typ   gguf.GGMLType
	}
	var lines []string
	blocks := map[string][]layerType{}
	for _, t := range ts {
		layer, rest, ok := splitBlock(t.Name)
		if !ok {
			lines = append(lines, t.Name+" "+t.Type.String())
			continue
		}
		key := "blk.*." + rest
		blocks[key] = append(blocks[key], layerType{layer, t.Type})
	}
	for key, lts := range blocks {
		slices.SortFunc(lts, func(a, b layerType) int { return cmp.Compare(a.layer, b.layer) })
		var b strings.Builder
		b.WriteString(key)
		for i := 0; i < len(lts); {
			j := i
			for j+1 < len(lts) && lts[j+1].layer == lts[j].layer+1 && lts[j+1].typ == lts[i].typ {
				j++
			}
			if j == i {
				fmt.Fprintf(&b, " %d:%s", lts[i].layer, lts[i].typ)
			} else {
				fmt.Fprintf(&b, " %d-%d:%s", lts[i].layer, lts[j].layer, lts[i].typ)
			}
			i = j + 1
		}
		lines = append(lines, b.String())
	}
	slices.Sort(lines)
	return lines
}

// splitBlock splits "blk.12.attn_v.weight" into 12 and "attn_v.weight".
func splitBlock(name string) (int, string, bool) {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return 0, "", false
	}
	num, tail, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, "", false
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return 0, "", false
	}
	return n, tail, true
}
