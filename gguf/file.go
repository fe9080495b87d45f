// Package gguf reads and writes GGUF model headers: the metadata and tensor
// descriptions that precede a model's weights.
//
// Reading works over an io.ReaderAt and touches only the header, so a 70B
// model on disk or behind an HTTP range reader costs a few MiB of reads.
// Every count and length in a header is checked against the bytes that can
// exist and against a fixed allocation bound before anything is allocated,
// so hostile files give errors, not panics or unbounded memory.
package gguf

import (
	"errors"
	"fmt"
	"math/bits"
)

// Magic is the four bytes every GGUF file starts with.
const Magic = "GGUF"

// DefaultAlignment is the data alignment when general.alignment is absent.
const DefaultAlignment = 32

// MaxDims is GGML_MAX_DIMS, the most dimensions a tensor may have.
const MaxDims = 4

// MaxNameLen is the longest tensor name ggml accepts (GGML_MAX_NAME less the
// terminating NUL).
const MaxNameLen = 63

// KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor: its name, shape (ne, innermost first, as
// ggml orders dimensions), type and offset within the data region.
type TensorInfo struct {
	Name  string
	Shape []uint64
	Type  GGMLType
	// Offset is relative to the start of the file's data region.
	Offset uint64
	// Size is the tensor's exact byte size (ggml_nbytes).
	Size uint64
}

// Elements returns the number of elements (the product of the shape).
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is a parsed GGUF header.
type File struct {
	Version   uint32
	Metadata  []KV
	Tensors   []TensorInfo
	Alignment uint64
	// DataOffset is where the data region starts: the header's end, padded
	// to Alignment. Tensor offsets are relative to it.
	DataOffset int64
	// Size is the file's size in bytes, as given to Read.
	Size int64

	index map[string]int
}

// Lookup finds a metadata value by key.
func (f *File) Lookup(key string) (Value, bool) {
	if f.index == nil {
		f.buildIndex()
	}
	i, ok := f.index[key]
	if !ok {
		return Value{}, false
	}
	return f.Metadata[i].Value, true
}

func (f *File) buildIndex() {
	f.index = make(map[string]int, len(f.Metadata))
	for i, kv := range f.Metadata {
		f.index[kv.Key] = i
	}
}

// Uint returns an integer metadata value as uint64.
func (f *File) Uint(key string) (uint64, bool) {
	v, ok := f.Lookup(key)
	if !ok {
		return 0, false
	}
	return v.AsUint()
}

// Float returns a numeric metadata value as float64.
func (f *File) Float(key string) (float64, bool) {
	v, ok := f.Lookup(key)
	if !ok {
		return 0, false
	}
	return v.AsFloat()
}

// Str returns a string metadata value.
func (f *File) Str(key string) (string, bool) {
	v, ok := f.Lookup(key)
	if !ok {
		return "", false
	}
	return v.AsString()
}

// Architecture returns general.architecture, or "" when it is missing.
func (f *File) Architecture() string {
	s, _ := f.Str("general.architecture")
	return s
}

// DataSize returns the bytes from the start of the data region to the end of
// the last tensor.
func (f *File) DataSize() uint64 {
	var end uint64
	for _, t := range f.Tensors {
		if e := t.Offset + t.Size; e > end {
			end = e
		}
	}
	return end
}

// Errors that Read wraps, for errors.Is.
var (
	// ErrTruncated means the file ended inside the header or before a
	// tensor's data.
	ErrTruncated = errors.New("file is truncated")
	// ErrLimit means a count or length in the header exceeds what can exist
	// in the file or the reader's allocation bound.
	ErrLimit = errors.New("exceeds limit")
	// ErrFormat means the header breaks a rule of the GGUF format.
	ErrFormat = errors.New("invalid GGUF")
)

// FormatError locates a problem in a GGUF header.
type FormatError struct {
	// Offset is the byte offset in the file where the bad field starts.
	Offset int64
	// Field names what was being read, e.g. `tensor 3 ("blk.0.attn_q.weight") type`.
	Field string
	// Err says what was wrong; it wraps ErrTruncated, ErrLimit or ErrFormat.
	Err error
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("gguf: at offset %d (0x%x), %s: %v", e.Offset, e.Offset, e.Field, e.Err)
}

func (e *FormatError) Unwrap() error { return e.Err }

// tensorBytes computes ggml_nbytes for a contiguous tensor: the row size of
// ne[0] elements times the number of rows. ok is false on overflow or a
// shape that is not a whole number of blocks.
func tensorBytes(t GGMLType, shape []uint64) (uint64, bool) {
	if len(shape) == 0 {
		return 0, false
	}
	row, ok := t.RowSize(shape[0])
	if !ok {
		return 0, false
	}
	total := row
	for _, d := range shape[1:] {
		hi, lo := bits.Mul64(total, d)
		if hi != 0 {
			return 0, false
		}
		total = lo
	}
	return total, true
}

// align rounds x up to a multiple of a (a power of two).
func align(x, a uint64) uint64 { return (x + a - 1) &^ (a - 1) }
