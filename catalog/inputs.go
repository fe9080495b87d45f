package catalog

import (
	"fmt"
	"strconv"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
)

// Inputs are the planner inputs of one artifact: what arch.FromGGUF needs
// from its GGUF header, so that planning needs neither the file nor the
// network. Every metadata value is kept exactly, except long arrays (the
// tokenizer's tokens, merges, scores), which keep only their element type
// and length: the planner reads a vocabulary's size, never its text.
// Tensors keep name, type, shape and offset, so every per-tensor size the
// accountant charges is the file's own.
type Inputs struct {
	Files []InputFile `json:"files"`
}

// InputFile is one GGUF file (one shard of a split model).
type InputFile struct {
	Name       string        `json:"name"`
	Size       int64         `json:"size"`
	Version    uint32        `json:"version"`
	Alignment  uint64        `json:"alignment"`
	DataOffset int64         `json:"data_offset"`
	Metadata   []InputKV     `json:"metadata"`
	Tensors    []InputTensor `json:"tensors"`
}

// InputKV is one metadata entry. Scalars are written as strings so that
// 64-bit integers and float32 values survive JSON exactly.
type InputKV struct {
	Key  string   `json:"k"`
	Type string   `json:"t"`
	Elem string   `json:"e,omitempty"` // element type of an array
	Len  int      `json:"n,omitempty"` // length of an array kept as a summary
	Val  string   `json:"v,omitempty"` // a scalar
	Vals []string `json:"a,omitempty"` // a short array of scalars
}

// InputTensor is one tensor: name, ggml type, shape (ne0 first), offset in
// the data region.
type InputTensor struct {
	Name   string   `json:"n"`
	Type   string   `json:"t"`
	Shape  []uint64 `json:"s"`
	Offset uint64   `json:"o"`
}

// summarizeOver is the array length from which only type and length are
// kept. Per-layer arrays (a few hundred at most) stay whole.
const summarizeOver = 4096

// InputsOf extracts the planner inputs of a parsed model; names are the
// files' names, in shard order.
func InputsOf(m *gguf.Model, names []string) (*Inputs, error) {
	if len(names) != len(m.Files) {
		return nil, fmt.Errorf("catalog: %d names for %d files", len(names), len(m.Files))
	}
	in := &Inputs{}
	for i, f := range m.Files {
		out := InputFile{Name: names[i], Size: f.Size, Version: f.Version, Alignment: f.Alignment, DataOffset: f.DataOffset}
		for _, kv := range f.Metadata {
			k, err := encodeKV(kv)
			if err != nil {
				return nil, err
			}
			out.Metadata = append(out.Metadata, k)
		}
		for _, t := range f.Tensors {
			out.Tensors = append(out.Tensors, InputTensor{Name: t.Name, Type: t.Type.String(), Shape: t.Shape, Offset: t.Offset})
		}
		in.Files = append(in.Files, out)
	}
	return in, nil
}

// Model rebuilds the parsed header the inputs were taken from.
func (in *Inputs) Model() (*gguf.Model, error) {
	var files []*gguf.File
	for _, f := range in.Files {
		g := &gguf.File{Version: f.Version, Alignment: f.Alignment, DataOffset: f.DataOffset, Size: f.Size}
		for _, kv := range f.Metadata {
			v, err := decodeKV(kv)
			if err != nil {
				return nil, fmt.Errorf("catalog: %s: %s: %w", f.Name, kv.Key, err)
			}
			g.Metadata = append(g.Metadata, gguf.KV{Key: kv.Key, Value: v})
		}
		for _, t := range f.Tensors {
			typ, ok := gguf.ParseGGMLType(t.Type)
			if !ok {
				return nil, fmt.Errorf("catalog: %s: tensor %s has unknown type %q", f.Name, t.Name, t.Type)
			}
			info := gguf.TensorInfo{Name: t.Name, Type: typ, Shape: t.Shape, Offset: t.Offset}
			row, ok := typ.RowSize(t.Shape[0])
			if !ok || len(t.Shape) == 0 {
				return nil, fmt.Errorf("catalog: %s: tensor %s shape %v is not whole %s blocks", f.Name, t.Name, t.Shape, t.Type)
			}
			info.Size = row
			for _, d := range t.Shape[1:] {
				info.Size *= d
			}
			g.Tensors = append(g.Tensors, info)
		}
		files = append(files, g)
	}
	return gguf.NewModel(files...)
}

// Arch rebuilds the architecture model; an architecture headroom does not
// model is returned as arch's Incompatible error.
func (in *Inputs) Arch() (*arch.Model, error) {
	m, err := in.Model()
	if err != nil {
		return nil, err
	}
	return arch.FromGGUF(m)
}

// Size is the total of the files' sizes.
func (in *Inputs) Size() int64 {
	var n int64
	for _, f := range in.Files {
		n += f.Size
	}
	return n
}

func encodeKV(kv gguf.KV) (InputKV, error) {
	v := kv.Value
	out := InputKV{Key: kv.Key, Type: v.Type().String()}
	if arr, ok := v.AsArray(); ok {
		out.Elem = arr.Elem().String()
		if arr.Elem() == gguf.Array {
			return out, fmt.Errorf("catalog: %s: nested arrays are not kept", kv.Key)
		}
		if arr.Len() > summarizeOver {
			out.Len = arr.Len()
			return out, nil
		}
		out.Vals = make([]string, arr.Len())
		for i := range out.Vals {
			s, err := scalarString(arr.Index(i))
			if err != nil {
				return out, fmt.Errorf("catalog: %s[%d]: %w", kv.Key, i, err)
			}
			out.Vals[i] = s
		}
		if out.Vals == nil {
			out.Vals = []string{}
		}
		return out, nil
	}
	s, err := scalarString(v)
	out.Val = s
	return out, err
}

func scalarString(v gguf.Value) (string, error) {
	switch v.Type() {
	case gguf.String:
		s, _ := v.AsString()
		return s, nil
	case gguf.Bool:
		b, _ := v.AsBool()
		return strconv.FormatBool(b), nil
	case gguf.Float32:
		f, _ := v.AsFloat()
		return strconv.FormatFloat(f, 'g', -1, 32), nil
	case gguf.Float64:
		f, _ := v.AsFloat()
		return strconv.FormatFloat(f, 'g', -1, 64), nil
	case gguf.Int8, gguf.Int16, gguf.Int32, gguf.Int64:
		n, _ := v.AsInt()
		return strconv.FormatInt(n, 10), nil
	case gguf.Uint8, gguf.Uint16, gguf.Uint32, gguf.Uint64:
		n, _ := v.AsUint()
		return strconv.FormatUint(n, 10), nil
	}
	return "", fmt.Errorf("value of type %s", v.Type())
}

func parseValueType(s string) (gguf.ValueType, bool) {
	for t := gguf.Uint8; t <= gguf.Float64; t++ {
		if t.String() == s {
			return t, true
		}
	}
	return 0, false
}

func parseScalar(t gguf.ValueType, s string) (gguf.Value, error) {
	switch t {
	case gguf.String:
		return gguf.StringValue(s), nil
	case gguf.Bool:
		b, err := strconv.ParseBool(s)
		return gguf.BoolValue(b), err
	case gguf.Float32:
		f, err := strconv.ParseFloat(s, 32)
		return gguf.Float32Value(float32(f)), err
	case gguf.Float64:
		f, err := strconv.ParseFloat(s, 64)
		return gguf.Float64Value(f), err
	case gguf.Int8, gguf.Int16, gguf.Int32, gguf.Int64:
		bits := map[gguf.ValueType]int{gguf.Int8: 8, gguf.Int16: 16, gguf.Int32: 32, gguf.Int64: 64}[t]
		n, err := strconv.ParseInt(s, 10, bits)
		switch t {
		case gguf.Int8:
			return gguf.Int8Value(int8(n)), err
		case gguf.Int16:
			return gguf.Int16Value(int16(n)), err
		case gguf.Int32:
			return gguf.Int32Value(int32(n)), err
		}
		return gguf.Int64Value(n), err
	case gguf.Uint8, gguf.Uint16, gguf.Uint32, gguf.Uint64:
		bits := map[gguf.ValueType]int{gguf.Uint8: 8, gguf.Uint16: 16, gguf.Uint32: 32, gguf.Uint64: 64}[t]
		n, err := strconv.ParseUint(s, 10, bits)
		switch t {
		case gguf.Uint8:
			return gguf.Uint8Value(uint8(n)), err
		case gguf.Uint16:
			return gguf.Uint16Value(uint16(n)), err
		case gguf.Uint32:
			return gguf.Uint32Value(uint32(n)), err
		}
		return gguf.Uint64Value(n), err
	}
	return gguf.Value{}, fmt.Errorf("unknown type %s", t)
}

func decodeKV(kv InputKV) (gguf.Value, error) {
	t, ok := parseValueType(kv.Type)
	if !ok {
		return gguf.Value{}, fmt.Errorf("unknown type %q", kv.Type)
	}
	if t != gguf.Array {
		return parseScalar(t, kv.Val)
	}
	elem, ok := parseValueType(kv.Elem)
	if !ok || elem == gguf.Array {
		return gguf.Value{}, fmt.Errorf("unknown element type %q", kv.Elem)
	}
	if kv.Len > 0 {
		// A summarized array: the right type and length, zero elements.
		return zeroArray(elem, kv.Len)
	}
	items := make([]gguf.Value, len(kv.Vals))
	for i, s := range kv.Vals {
		v, err := parseScalar(elem, s)
		if err != nil {
			return gguf.Value{}, err
		}
		items[i] = v
	}
	return gguf.ArrayOf(elem, items...)
}

func zeroArray(elem gguf.ValueType, n int) (gguf.Value, error) {
	switch elem {
	case gguf.String:
		return gguf.EmptyStringsValue(n), nil
	case gguf.Int32:
		return gguf.Int32sValue(make([]int32, n)), nil
	case gguf.Float32:
		return gguf.Float32sValue(make([]float32, n)), nil
	case gguf.Bool:
		return gguf.BoolsValue(make([]bool, n)), nil
	}
	zero, err := parseScalar(elem, "0")
	if err != nil {
		return gguf.Value{}, err
	}
	items := make([]gguf.Value, n)
	for i := range items {
		items[i] = zero
	}
	return gguf.ArrayOf(elem, items...)
}
