// Command synthgen writes the sparse GGUF files that the conformance harness
// loads into llama.cpp, many in one process, and reports each file's size and
// the sha256 of its header bytes. The harness stores that digest in every
// golden file, so a change to a synth shape or recipe shows up as a stale
// golden instead of a silent disagreement.
//
//	go run ./conformance/cmd/synthgen -dir /tmp/work llama-3.2-1b:Q8_0 qwen3-8b:Q4_K_M
//
// A shape named after a projector (mmproj-siglip896:F16) writes that
// multimodal projector, for --mmproj, with its matrices in F16, BF16 or F32.
//
// It prints one JSON object keyed by "shape:quant". A file whose header
// already matches is left alone, which keeps repeated runs cheap.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/synth"
)

// entry describes one written file; the field names are what the Node
// harness reads.
type entry struct {
	Shape        string `json:"shape"`
	Quant        string `json:"quant"`
	Arch         string `json:"arch"`
	Path         string `json:"path"`
	Size         int64  `json:"size_bytes"`
	HeaderBytes  int64  `json:"header_bytes"`
	HeaderSHA256 string `json:"header_sha256"`
	Tensors      int    `json:"tensors"`
	Params       uint64 `json:"params"`
	Source       string `json:"source"`
}

func main() {
	dir := flag.String("dir", os.TempDir(), "directory for the .gguf files")
	flag.Parse()
	if err := run(*dir, flag.Args(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "synthgen:", err)
		os.Exit(1)
	}
}

func run(dir string, specs []string, w io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	out := map[string]entry{}
	for _, spec := range specs {
		name, quant, ok := strings.Cut(spec, ":")
		if !ok {
			return fmt.Errorf("want SHAPE:QUANT, got %q", spec)
		}
		e, err := write(dir, name, quant)
		if err != nil {
			return fmt.Errorf("%s: %w", spec, err)
		}
		out[spec] = e
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// projectors are the vision encoders synthgen writes as mmproj files:
// Gemma 3's, and a small one of other sizes throughout (448-pixel
// images, 4 layers, a 1152-wide text model as gemma-3-1b's) that checks
// the replay of clip's graph does not hold for one shape only; and
// likewise Qwen2.5-VL-7B's (for qwen2.5-7b's 3584-wide text model),
// small Qwen2.5-VL and Qwen2-VL ones for qwen2.5-0.5b.
var projectors = map[string]struct {
	v      synth.Vision
	source string
}{
	"mmproj-siglip896": {synth.SigLIP896, "synth.SigLIP896, Gemma 3's vision tower"},
	"mmproj-test448": {synth.Vision{ImageSize: 448, PatchSize: 14, Embd: 768, FF: 3072, Heads: 12, Blocks: 4, TextEmbd: 1152},
		"a small SigLIP-shaped test encoder for gemma-3-1b, no published model"},
	"mmproj-mistral3": {synth.MistralVision, "synth.MistralVision, Ministral 3 3B's Pixtral encoder with its 2x2 patch merger"},
	"mmproj-pixtral-test": {synth.Vision{Type: "pixtral", ImageSize: 512, PatchSize: 16, Embd: 512, FF: 1536, Heads: 8, Blocks: 3, TextEmbd: 3072},
		"a small Pixtral-shaped test encoder without a patch merger (as Pixtral 12B's) for ministral-3-3b, no published model"},
	"mmproj-qwen25vl-7b": {synth.Qwen25VL7B, "synth.Qwen25VL7B, Qwen2.5-VL-7B-Instruct's vision tower"},
	"mmproj-qwen25vl-test": {synth.Vision{ImageSize: 560, PatchSize: 14, Embd: 512, FF: 1024, Heads: 8, Blocks: 4, TextEmbd: 896,
		Type: "qwen2.5vl_merger", WindowPattern: 2}, "a small Qwen2.5-VL-shaped test encoder for qwen2.5-0.5b, no published model"},
	"mmproj-qwen2vl-test": {synth.Vision{ImageSize: 560, PatchSize: 14, Embd: 512, FF: 2048, Heads: 8, Blocks: 4, TextEmbd: 896,
		Type: "qwen2vl_merger"}, "a small Qwen2-VL-shaped test encoder for qwen2.5-0.5b, no published model"},
}

func write(dir, name, quant string) (entry, error) {
	if p, ok := projectors[strings.ToLower(name)]; ok {
		return writeProjector(dir, strings.ToLower(name), quant, p.v, p.source)
	}
	s, ok := synth.Lookup(name)
	if !ok {
		return entry{}, fmt.Errorf("unknown shape (have %s)", strings.Join(synth.Names(), ", "))
	}
	q, err := synth.ParseQuant(quant)
	if err != nil {
		return entry{}, err
	}
	b, err := synth.Build(s, q)
	if err != nil {
		return entry{}, err
	}
	return writeBuilt(b, filepath.Join(dir, strings.ToLower(name)+"."+string(q)+".gguf"),
		entry{Shape: strings.ToLower(name), Quant: string(q), Arch: s.Arch, Source: s.Source})
}

// writeBuilt writes b's file at path unless it is there already, and fills
// e's figures of it.
func writeBuilt(b *gguf.Builder, path string, e entry) (entry, error) {
	f, err := b.Layout()
	if err != nil {
		return entry{}, err
	}
	var hdr bytes.Buffer
	if err := b.WriteHeader(&hdr); err != nil {
		return entry{}, err
	}
	sum := sha256.Sum256(hdr.Bytes())
	if !sameFile(path, hdr.Bytes(), f.Size) {
		if err := b.WriteFile(path); err != nil {
			return entry{}, err
		}
	}
	params, err := paramCount(b)
	if err != nil {
		return entry{}, err
	}
	e.Path, e.Size, e.HeaderBytes, e.HeaderSHA256 = path, f.Size, int64(hdr.Len()), hex.EncodeToString(sum[:])
	e.Tensors, e.Params = len(f.Tensors), params
	return e, nil
}

// writeProjector writes the mmproj file of vision encoder v with its
// matrices in type quant.
func writeProjector(dir, name, quant string, v synth.Vision, source string) (entry, error) {
	var typ gguf.GGMLType
	switch strings.ToUpper(quant) {
	case "F16":
		typ = gguf.TypeF16
	case "BF16":
		typ = gguf.TypeBF16
	case "F32":
		typ = gguf.TypeF32
	default:
		return entry{}, fmt.Errorf("a projector's matrices are F16, BF16 or F32, not %q", quant)
	}
	b, err := synth.Projector(v, typ)
	if err != nil {
		return entry{}, err
	}
	return writeBuilt(b, filepath.Join(dir, name+"."+strings.ToUpper(quant)+".gguf"),
		entry{Shape: name, Quant: strings.ToUpper(quant), Arch: "clip", Source: source})
}

// sameFile reports whether path already holds this header and size, so the
// file need not be rewritten.
func sameFile(path string, hdr []byte, size int64) bool {
	fh, err := os.Open(path)
	if err != nil {
		return false
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil || st.Size() != size {
		return false
	}
	have := make([]byte, len(hdr))
	if _, err := io.ReadFull(fh, have); err != nil {
		return false
	}
	return bytes.Equal(have, hdr)
}

func paramCount(b interface {
	Layout() (*gguf.File, error)
}) (uint64, error) {
	f, err := b.Layout()
	if err != nil {
		return 0, err
	}
	m, err := gguf.NewModel(f)
	if err != nil {
		return 0, err
	}
	return m.Params(), nil
}
