package gguf

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
)

// Metadata keys that llama.cpp's gguf-split writes into every shard.
const (
	KeySplitNo      = "split.no"
	KeySplitCount   = "split.count"
	KeySplitTensors = "split.tensors.count"
)

var splitName = regexp.MustCompile(`^(.*)-(\d{5})-of-(\d{5})\.gguf$`)

// SplitName recognizes llama.cpp's shard naming, PREFIX-00001-of-00003.gguf.
// no is 1-based. ok is false for names that are not shards.
func SplitName(name string) (prefix string, no, count int, ok bool) {
	m := splitName.FindStringSubmatch(name)
	if m == nil {
		return "", 0, 0, false
	}
	no, _ = strconv.Atoi(m[2])
	count, _ = strconv.Atoi(m[3])
	if no < 1 || count < 1 || no > count {
		return "", 0, 0, false
	}
	return m[1], no, count, true
}

// ShardName returns the file name of shard no (1-based) of count.
func ShardName(prefix string, no, count int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, no, count)
}

// Tensor is a tensor of a model that may span several files.
type Tensor struct {
	TensorInfo
	// Shard is the index into Model.Files of the file holding the data.
	Shard int
	// FileOffset is the absolute byte offset of the data in that file.
	FileOffset int64
}

// Model is one model read from one GGUF file or from all shards of a split
// model, in shard order. Metadata comes from the first shard, as llama.cpp
// reads it.
type Model struct {
	Files   []*File
	Tensors []Tensor
}

// NewModel joins parsed shards into one model. With one file it just wraps
// it; with several it checks that they are the shards 0..n-1 of one split,
// that the tensor counts agree and that no tensor appears twice.
func NewModel(files ...*File) (*Model, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("gguf: a model needs at least one file")
	}
	m := &Model{Files: files}
	count, hasCount := files[0].Uint(KeySplitCount)
	if len(files) > 1 || (hasCount && count > 1) {
		if !hasCount {
			return nil, fmt.Errorf("gguf: %d files given but the first has no %s", len(files), KeySplitCount)
		}
		if count != uint64(len(files)) {
			return nil, fmt.Errorf("gguf: the first shard says %s = %d, but %d files were given", KeySplitCount, count, len(files))
		}
		for i, f := range files {
			no, ok := f.Uint(KeySplitNo)
			if !ok || no != uint64(i) {
				return nil, fmt.Errorf("gguf: file %d of the split should have %s = %d, found %v", i+1, KeySplitNo, i, describe(f, KeySplitNo))
			}
			if c, ok := f.Uint(KeySplitCount); !ok || c != count {
				return nil, fmt.Errorf("gguf: file %d of the split has %s %v, the first has %d", i+1, KeySplitCount, describe(f, KeySplitCount), count)
			}
			if err := sameAsFirst(files[0], f, i); err != nil {
				return nil, err
			}
		}
	}
	seen := make(map[string]int)
	for i, f := range files {
		for _, t := range f.Tensors {
			if j, dup := seen[t.Name]; dup {
				return nil, fmt.Errorf("gguf: tensor %q appears in shard %d and shard %d", t.Name, j+1, i+1)
			}
			seen[t.Name] = i
			m.Tensors = append(m.Tensors, Tensor{TensorInfo: t, Shard: i, FileOffset: f.DataOffset + int64(t.Offset)})
		}
	}
	if want, ok := files[0].Uint(KeySplitTensors); ok && want != uint64(len(m.Tensors)) {
		return nil, fmt.Errorf("gguf: the split declares %s = %d, but its shards hold %d tensors", KeySplitTensors, want, len(m.Tensors))
	}
	return m, nil
}

// sameAsFirst checks that shard i (0-based) declares what the first does
// wherever it declares anything: gguf-split writes split.tensors.count
// into every shard and the rest of the metadata into the first only, so
// a later shard naming another architecture or tensor total is a file
// of another model.
func sameAsFirst(first, f *File, i int) error {
	if n, ok := f.Uint(KeySplitTensors); ok {
		if want, ok := first.Uint(KeySplitTensors); !ok || n != want {
			return fmt.Errorf("gguf: shard %d of the split has %s = %d, but the first shard has %s", i+1, KeySplitTensors, n, describe(first, KeySplitTensors))
		}
	}
	if a, ok := f.Lookup("general.architecture"); ok {
		if s, isStr := a.AsString(); !isStr || s != first.Architecture() {
			return fmt.Errorf("gguf: shard %d of the split has general.architecture %s, but the first shard has %s",
				i+1, cutValue(f, "general.architecture"), cutValue(first, "general.architecture"))
		}
	}
	return nil
}

// cutValue formats a key's value for an error, a string cut to 64 bytes:
// a hostile header's string can be hundreds of megabytes.
func cutValue(f *File, key string) string {
	const n = 64
	if s, ok := f.Str(key); ok && len(s) > n {
		return strconv.Quote(s[:n]) + fmt.Sprintf(" (cut, %d bytes)", len(s))
	}
	return describe(f, key)
}

func describe(f *File, key string) string {
	v, ok := f.Lookup(key)
	if !ok {
		return "nothing"
	}
	return v.String()
}

// Lookup finds a metadata value in the first shard.
func (m *Model) Lookup(key string) (Value, bool) { return m.Files[0].Lookup(key) }

// Uint returns an integer metadata value of the first shard.
func (m *Model) Uint(key string) (uint64, bool) { return m.Files[0].Uint(key) }

// Float returns a numeric metadata value of the first shard.
func (m *Model) Float(key string) (float64, bool) { return m.Files[0].Float(key) }

// Str returns a string metadata value of the first shard.
func (m *Model) Str(key string) (string, bool) { return m.Files[0].Str(key) }

// Architecture returns general.architecture.
func (m *Model) Architecture() string { return m.Files[0].Architecture() }

// Size returns the total size of all files in bytes.
func (m *Model) Size() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// Params returns the total number of tensor elements: the parameter count.
func (m *Model) Params() uint64 {
	var n uint64
	for _, t := range m.Tensors {
		n += t.Elements()
	}
	return n
}

// TensorBytes returns the total bytes of tensor data.
func (m *Model) TensorBytes() uint64 {
	var n uint64
	for _, t := range m.Tensors {
		n += t.Size
	}
	return n
}

// HeaderBytes returns the total bytes of all headers, up to each file's data
// region: what a remote read must fetch.
func (m *Model) HeaderBytes() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.DataOffset
	}
	return n
}

// TypeStats totals the tensors of one ggml type.
type TypeStats struct {
	Type     GGMLType
	Tensors  int
	Elements uint64
	Bytes    uint64
}

// ByType totals the model's tensors per ggml type, largest share first.
func (m *Model) ByType() []TypeStats {
	idx := map[GGMLType]int{}
	var out []TypeStats
	for _, t := range m.Tensors {
		i, ok := idx[t.Type]
		if !ok {
			i = len(out)
			idx[t.Type] = i
			out = append(out, TypeStats{Type: t.Type})
		}
		out[i].Tensors++
		out[i].Elements += t.Elements()
		out[i].Bytes += t.Size
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Bytes != out[b].Bytes {
			return out[a].Bytes > out[b].Bytes
		}
		return out[a].Type < out[b].Type
	})
	return out
}
