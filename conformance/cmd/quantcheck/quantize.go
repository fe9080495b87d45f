package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/gguf"
)

// quantizer runs one llama-quantize binary.
type quantizer struct {
	bin     string
	dir     string
	threads int
	write   bool
}

// tensorType is the type the quantizer gave one tensor.
type tensorType struct {
	Name string
	Type gguf.GGMLType
}

// types returns the type llama-quantize gives every tensor of in under
// quant, in the order it reports them.
func (q quantizer) types(in, quant string) ([]tensorType, error) {
	if !q.write {
		out, err := exec.Command(q.bin, "--dry-run", in, quant).CombinedOutput()
		if err != nil {
			return nil, refusal(out, err)
		}
		return parseDryRun(out)
	}
	path := filepath.Join(q.dir, "out."+quant+".gguf")
	// The output can be gigabytes; it goes as soon as its header is read,
	// and on every error path too.
	defer os.Remove(path)
	out, err := exec.Command(q.bin, in, path, quant, strconv.Itoa(q.threads)).CombinedOutput()
	if err != nil {
		return nil, refusal(out, err)
	}
	return readTypes(path)
}

// refusal keeps the quantizer's own explanation: the last lines it printed.
func refusal(out []byte, err error) error {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return fmt.Errorf("llama-quantize: %v: %s", err, strings.Join(lines, " | "))
}

// readTypes reads the tensor types from a quantized file's header.
func readTypes(path string) ([]tensorType, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	h, err := gguf.Read(f, st.Size())
	if err != nil {
		return nil, err
	}
	out := make([]tensorType, len(h.Tensors))
	for i, t := range h.Tensors {
		out[i] = tensorType{t.Name, t.Type}
	}
	return out, nil
}

// dryRunLine matches the line llama_model_quantize_impl logs for every
// tensor under --dry-run:
//
//	[  4/ 290] blk.0.attn_k.weight  - [ 896, 128, 1, 1], type = f16, size = 0.22 MiB -> 0.08 MiB (q5_0)
//
// A tensor kept in its input type has no "-> ... (type)" tail.
var dryRunLine = regexp.MustCompile(`^\[\s*(\d+)/\s*(\d+)\]\s+(\S+)\s+- \[[^\]]*\], type =\s*(\S+), size =[^(]*(?:\((\S+)\))?\s*$`)

// parseDryRun reads the per-tensor lines of a --dry-run log and checks that
// none is missing, since a silently skipped line would hide a tensor.
func parseDryRun(log []byte) ([]tensorType, error) {
	var out []tensorType
	total := -1
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		m := dryRunLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		i, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		if i != len(out)+1 || (total >= 0 && n != total) {
			return nil, fmt.Errorf("dry-run log: line %q out of sequence", sc.Text())
		}
		total = n
		name := m[4]
		if m[5] != "" {
			name = m[5]
		}
		t, ok := gguf.ParseGGMLType(name)
		if !ok {
			return nil, fmt.Errorf("dry-run log: unknown type %q for %s", name, m[3])
		}
		out = append(out, tensorType{m[3], t})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 || len(out) != total {
		return nil, fmt.Errorf("dry-run log: %d tensor lines of %d", len(out), total)
	}
	return out, nil
}
