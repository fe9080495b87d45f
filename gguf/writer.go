package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Builder assembles a GGUF file: metadata in insertion order, then tensors
// laid out back to back in the data region, each padded to the alignment as
// llama.cpp's writer does.
//
// A tensor's data is either given bytes or left as a hole. WriteFile leaves
// holes sparse, so a file shaped like a 70B model takes only its header's
// worth of disk.
type Builder struct {
	// Version is the GGUF version to write: 3 (the default) or 2, which
	// differ only in that version 3 allows big-endian files.
	Version uint32
	meta    []KV
	keys    map[string]int
	tensors []builderTensor
}

type builderTensor struct {
	info TensorInfo
	data []byte
}

// NewBuilder returns an empty version-3 builder.
func NewBuilder() *Builder { return &Builder{Version: 3, keys: map[string]int{}} }

// Set adds a metadata entry, or replaces the value of an existing key in place.
func (b *Builder) Set(key string, v Value) *Builder {
	if i, ok := b.keys[key]; ok {
		b.meta[i].Value = v
		return b
	}
	b.keys[key] = len(b.meta)
	b.meta = append(b.meta, KV{Key: key, Value: v})
	return b
}

// AddTensor appends a tensor description. data may be nil (a hole) or must
// hold exactly the tensor's byte size.
func (b *Builder) AddTensor(name string, t GGMLType, shape []uint64, data []byte) error {
	if len(name) == 0 || len(name) > MaxNameLen {
		return fmt.Errorf("gguf: tensor name %q must have 1 to %d bytes", name, MaxNameLen)
	}
	if len(shape) == 0 || len(shape) > MaxDims {
		return fmt.Errorf("gguf: tensor %q has %d dimensions, expected 1 to %d", name, len(shape), MaxDims)
	}
	if !t.Valid() {
		return fmt.Errorf("gguf: tensor %q has unknown or removed type %s", name, t)
	}
	size, ok := tensorBytes(t, shape)
	if !ok {
		info, _ := t.Info()
		return fmt.Errorf("gguf: tensor %q shape %v is not a whole number of %s blocks of %d, or overflows", name, shape, t, info.BlockSize)
	}
	if data != nil && uint64(len(data)) != size {
		return fmt.Errorf("gguf: tensor %q needs %d bytes of data, got %d", name, size, len(data))
	}
	for _, have := range b.tensors {
		if have.info.Name == name {
			return fmt.Errorf("gguf: tensor %q added twice", name)
		}
	}
	b.tensors = append(b.tensors, builderTensor{
		info: TensorInfo{Name: name, Shape: append([]uint64(nil), shape...), Type: t, Size: size},
		data: data,
	})
	return nil
}

func (b *Builder) alignment() (uint64, error) {
	i, ok := b.keys["general.alignment"]
	if !ok {
		return DefaultAlignment, nil
	}
	v := b.meta[i].Value
	a, _ := v.AsUint()
	if v.Type() != Uint32 || a == 0 || a&(a-1) != 0 {
		return 0, fmt.Errorf("gguf: general.alignment must be a uint32 power of two, have %s %v", v.Type(), v)
	}
	return a, nil
}

// Layout returns the header the builder would write, with every offset and
// size filled in, as Read would return it.
func (b *Builder) Layout() (*File, error) {
	a, err := b.alignment()
	if err != nil {
		return nil, err
	}
	var hdr countingWriter
	if err := b.writeHeader(&hdr, a); err != nil {
		return nil, err
	}
	f := &File{Version: b.Version, Alignment: a, Metadata: append([]KV(nil), b.meta...)}
	f.DataOffset = int64(align(uint64(hdr), a))
	var off uint64
	for _, t := range b.tensors {
		info := t.info
		info.Offset = off
		f.Tensors = append(f.Tensors, info)
		off += align(info.Size, a)
	}
	f.Size = f.DataOffset + int64(off)
	return f, nil
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

// WriteHeader writes the header and the padding up to the data region.
func (b *Builder) WriteHeader(w io.Writer) error {
	a, err := b.alignment()
	if err != nil {
		return err
	}
	cw := &countWriter{w: w}
	if err := b.writeHeader(cw, a); err != nil {
		return err
	}
	pad := align(uint64(cw.n), a) - uint64(cw.n)
	_, err = cw.Write(make([]byte, pad))
	return err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (b *Builder) writeHeader(w io.Writer, alignment uint64) error {
	if b.Version != 2 && b.Version != 3 {
		return fmt.Errorf("gguf: can write versions 2 and 3, not %d", b.Version)
	}
	e := &encoder{w: bufio.NewWriter(w)}
	e.raw([]byte(Magic))
	e.u32(b.Version)
	e.u64(uint64(len(b.tensors)))
	e.u64(uint64(len(b.meta)))
	for _, kv := range b.meta {
		e.str(kv.Key)
		e.u32(uint32(kv.Value.typ))
		e.value(kv.Value)
	}
	var off uint64
	for _, t := range b.tensors {
		e.str(t.info.Name)
		e.u32(uint32(len(t.info.Shape)))
		for _, d := range t.info.Shape {
			e.u64(d)
		}
		e.u32(uint32(t.info.Type))
		e.u64(off)
		off += align(t.info.Size, alignment)
	}
	if e.err != nil {
		return e.err
	}
	return e.w.Flush()
}

// Bytes returns the whole file, data included, in memory. Holes become
// zeros, so use it for small files only.
func (b *Builder) Bytes() ([]byte, error) {
	f, err := b.Layout()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(int(f.Size))
	if err := b.WriteHeader(&buf); err != nil {
		return nil, err
	}
	out := buf.Bytes()
	out = append(out, make([]byte, f.Size-int64(len(out)))...)
	for i, t := range b.tensors {
		copy(out[f.DataOffset+int64(f.Tensors[i].Offset):], t.data)
	}
	return out, nil
}

// WriteFile writes the file at path. Tensors without data are left as holes
// and the file is extended to its full size with Truncate, so on file
// systems with sparse files the holes cost no disk. A path that holds
// anything but a regular file (a device, a FIFO, a directory, a link) is
// refused: a failed write removes what it wrote, and must never remove
// /dev/null.
func (b *Builder) WriteFile(path string) (err error) {
	f, err := b.Layout()
	if err != nil {
		return err
	}
	if st, err := os.Lstat(path); err == nil && !st.Mode().IsRegular() {
		return fmt.Errorf("writing %s: it exists and is not a regular file but %s; name a new file", path, kindOf(st.Mode()))
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	if err := b.WriteHeader(out); err != nil {
		return err
	}
	for i, t := range b.tensors {
		if t.data != nil {
			if _, err := out.WriteAt(t.data, f.DataOffset+int64(f.Tensors[i].Offset)); err != nil {
				return err
			}
		}
	}
	return out.Truncate(f.Size)
}

// kindOf names what a non-regular file is.
func kindOf(m os.FileMode) string {
	switch {
	case m&os.ModeDir != 0:
		return "a directory"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file"
}

type encoder struct {
	w   *bufio.Writer
	err error
	tmp [8]byte
}

func (e *encoder) raw(p []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(p)
	}
}

func (e *encoder) u32(x uint32) {
	binary.LittleEndian.PutUint32(e.tmp[:4], x)
	e.raw(e.tmp[:4])
}

func (e *encoder) u64(x uint64) {
	binary.LittleEndian.PutUint64(e.tmp[:8], x)
	e.raw(e.tmp[:8])
}

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		_, e.err = e.w.WriteString(s)
	}
}

func (e *encoder) value(v Value) {
	switch size := v.typ.fixedSize(); {
	case size > 0:
		binary.LittleEndian.PutUint64(e.tmp[:8], v.bits)
		e.raw(e.tmp[:size])
	case v.typ == String:
		e.str(v.str)
	case v.typ == Array:
		a := v.arr
		if a == nil {
			a = &ArrayValue{elem: Uint8}
		}
		e.u32(uint32(a.elem))
		e.u64(uint64(a.n))
		switch a.elem {
		case String:
			start := uint32(0)
			for _, end := range a.ends {
				e.u64(uint64(end - start))
				e.raw(a.blob[start:end])
				start = end
			}
		case Array:
			for _, sub := range a.sub {
				e.value(sub)
			}
		default:
			e.raw(a.raw)
		}
	default:
		if e.err == nil {
			e.err = errors.New("gguf: cannot write a value of unknown type " + v.typ.String())
		}
	}
}

// ReaderAt returns the file WriteFile would write, as an io.ReaderAt that
// keeps only the header in memory and reads the data region as zeros, and
// the file's size. It lets tests read a 70B-shaped file without disk.
func (b *Builder) ReaderAt() (io.ReaderAt, int64, error) {
	f, err := b.Layout()
	if err != nil {
		return nil, 0, err
	}
	var hdr bytes.Buffer
	if err := b.WriteHeader(&hdr); err != nil {
		return nil, 0, err
	}
	return zeroTail(hdr.Bytes()), f.Size, nil
}

// Model reads back the header b writes, as Read and NewModel read a file
// (its tensor data all zeros).
func (b *Builder) Model() (*Model, error) {
	r, size, err := b.ReaderAt()
	if err != nil {
		return nil, err
	}
	f, err := Read(r, size)
	if err != nil {
		return nil, err
	}
	return NewModel(f)
}

// zeroTail is header bytes followed by zeros without end.
type zeroTail []byte

func (z zeroTail) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	if off < int64(len(z)) {
		n = copy(p, z[off:])
	}
	clear(p[n:])
	return len(p), nil
}

// RenameArchitecture moves the builder to another architecture name: it
// sets general.architecture and renames every key under the old name's
// prefix, keeping their order. llama.cpp reads an architecture's
// hyperparameters under its own name, so this is how a test writes a
// file of an architecture whose tensors and keys match another's.
func (b *Builder) RenameArchitecture(to string) error {
	i, ok := b.keys["general.architecture"]
	if !ok {
		return errors.New("gguf: no general.architecture to rename")
	}
	from, _ := b.meta[i].Value.AsString()
	if to == "" || to == from {
		return fmt.Errorf("gguf: rename architecture %q to %q: want another, non-empty name", from, to)
	}
	prefix := from + "."
	for j := range b.meta {
		if rest, ok := strings.CutPrefix(b.meta[j].Key, prefix); ok {
			if _, clash := b.keys[to+"."+rest]; clash {
				return fmt.Errorf("gguf: rename architecture to %q: key %s.%s exists already", to, to, rest)
			}
		}
	}
	for j := range b.meta {
		if rest, ok := strings.CutPrefix(b.meta[j].Key, prefix); ok {
			delete(b.keys, b.meta[j].Key)
			b.meta[j].Key = to + "." + rest
			b.keys[b.meta[j].Key] = j
		}
	}
	b.meta[i].Value = StringValue(to)
	return nil
}
