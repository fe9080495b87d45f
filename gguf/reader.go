package gguf

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
)

// DefaultMaxAlloc bounds the memory one Read may allocate for a header,
// whatever the header claims. Real headers are far smaller: a 150k-token
// vocabulary with its merges takes about 10 MiB.
const DefaultMaxAlloc = 256 << 20

// Options tune Read. The zero value uses the defaults.
type Options struct {
	// MaxAlloc bounds the bytes allocated for metadata and tensor
	// descriptions (default DefaultMaxAlloc).
	MaxAlloc int64
	// Budget, when set, is charged instead of a fresh budget of MaxAlloc,
	// so that the reader under the parse can charge its buffers to it.
	Budget *Budget
	// MaxArrayDepth bounds nested arrays (default 8).
	MaxArrayDepth int
	// Context, when set, is checked before every read of the underlying
	// ReaderAt (at most every 64 KiB), so that a parse of a slow or huge
	// header stops when the command is interrupted or the request ends.
	Context context.Context
}

// Read parses the GGUF header of a file of the given size. It reads only the
// header, never tensor data, and checks every tensor against the file's size.
func Read(r io.ReaderAt, size int64) (*File, error) {
	return ReadWith(r, size, Options{})
}

// ReadWith is Read with explicit options.
func ReadWith(r io.ReaderAt, size int64, opt Options) (*File, error) {
	if opt.MaxAlloc <= 0 {
		opt.MaxAlloc = DefaultMaxAlloc
	}
	if opt.MaxArrayDepth <= 0 {
		opt.MaxArrayDepth = 8
	}
	if size < 0 {
		return nil, fmt.Errorf("gguf: file size %d is negative", size)
	}
	b := opt.Budget
	if b == nil {
		b = NewBudget(opt.MaxAlloc)
	}
	c := &cursor{r: r, size: size, budget: b, maxDepth: opt.MaxArrayDepth, ctx: opt.Context}
	// The staging buffer.
	if err := c.charge(0, chunk); err != nil {
		return nil, err
	}
	return c.parse()
}

// chunk is how much the cursor asks of the ReaderAt at a time. Header fields
// are small, so reading ahead turns thousands of tiny reads into a few.
const chunk = 64 << 10

// Minimum encoded sizes, used to reject counts that cannot fit in the file
// before allocating anything for them.
const (
	minKVBytes     = 8 + 1 + 4             // key length, a 1-byte key, type tag (value may be empty)
	minTensorBytes = 8 + 1 + 4 + 8 + 4 + 8 // name length, name, n_dims, one dim, type, offset
)

type cursor struct {
	r        io.ReaderAt
	size     int64
	off      int64  // next byte to consume
	buf      []byte // bytes of the file starting at bufOff
	bufOff   int64
	budget   *Budget
	maxDepth int
	field    string // what is being read, for errors
	ctx      context.Context
}

func (c *cursor) fail(at int64, err error, format string, args ...any) error {
	return &FormatError{Offset: at, Field: c.field, Err: fmt.Errorf(format+": %w", append(args, err)...)}
}

// plausibleHeader is the most bytes a real header's counts can ask for:
// a count that needs more is a corrupt or hostile one, a count that needs
// less than this and more than the file has left is a file cut short.
const plausibleHeader = 1 << 30

// tooMany says that count items of at least min bytes each cannot fit in
// what is left of the file: truncated where a real header could hold
// them (a download cut short), else a count beyond any real file.
func (c *cursor) tooMany(at int64, count uint64, min int64, what string) error {
	if count <= plausibleHeader/uint64(min) {
		return c.fail(at, ErrTruncated, "the header lists %d %s, which need at least %d bytes, and the file has %d left of its %d",
			count, what, int64(count)*min, c.remaining(), c.size)
	}
	return c.fail(at, ErrLimit, "%d %s cannot fit in the %d bytes left in the file", count, what, c.remaining())
}

// remaining is how many bytes of the file are left after the cursor.
func (c *cursor) remaining() int64 { return c.size - c.off }

// charge takes n bytes from the allocation budget.
func (c *cursor) charge(at int64, n int64) error {
	if err := c.budget.Charge(n); err != nil {
		return &FormatError{Offset: at, Field: c.field, Err: err}
	}
	return nil
}

// chargeMul charges count items of size bytes, refusing a product that
// overflows.
func (c *cursor) chargeMul(at int64, count uint64, size int64) error {
	if count > uint64(math.MaxInt64/size) {
		return c.fail(at, ErrLimit, "%d items of %d bytes overflow any memory bound", count, size)
	}
	return c.charge(at, int64(count)*size)
}

// copyTo fills dst with the next len(dst) bytes, through the staging
// buffer a chunk at a time, so that a large value is read straight into
// its final allocation rather than into a buffer of its size first.
func (c *cursor) copyTo(dst []byte) error {
	for len(dst) > 0 {
		n := min(len(dst), chunk)
		b, err := c.next(int64(n))
		if err != nil {
			return err
		}
		copy(dst, b)
		dst = dst[n:]
	}
	return nil
}

// next returns the next n bytes and advances. The slice is valid until the
// next call; callers copy what they keep.
func (c *cursor) next(n int64) ([]byte, error) {
	if n > c.remaining() {
		return nil, c.fail(c.off, ErrTruncated, "need %d bytes, but the file has %d left (size %d)", n, c.remaining(), c.size)
	}
	lo := c.off - c.bufOff
	if lo >= 0 && lo+n <= int64(len(c.buf)) {
		c.off += n
		return c.buf[lo : lo+n], nil
	}
	if c.ctx != nil {
		if err := context.Cause(c.ctx); err != nil {
			return nil, &FormatError{Offset: c.off, Field: c.field, Err: fmt.Errorf("stopped before reading byte %d: %w", c.off, err)}
		}
	}
	want := max(n, chunk)
	want = min(want, c.remaining())
	if int64(cap(c.buf)) < want {
		c.buf = make([]byte, want)
	}
	c.buf = c.buf[:want]
	got, err := c.r.ReadAt(c.buf, c.off)
	if int64(got) < n {
		c.buf = c.buf[:0]
		if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, c.fail(c.off, ErrTruncated, "need %d bytes, read only %d", n, got)
		}
		return nil, &FormatError{Offset: c.off, Field: c.field, Err: fmt.Errorf("reading bytes %d to %d failed: %w", c.off, c.off+want, err)}
	}
	c.buf = c.buf[:got]
	c.bufOff = c.off
	c.off += n
	return c.buf[:n], nil
}

func (c *cursor) u32() (uint32, error) {
	b, err := c.next(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (c *cursor) u64() (uint64, error) {
	b, err := c.next(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// str reads a length-prefixed string, bounded by the file and the budget.
func (c *cursor) str() (string, error) {
	at := c.off
	n, err := c.u64()
	if err != nil {
		return "", err
	}
	if n > uint64(c.remaining()) {
		return "", c.fail(at, ErrLimit, "string length %d is longer than the %d bytes left in the file", n, c.remaining())
	}
	if err := c.charge(at, int64(n)+smallAlloc); err != nil {
		return "", err
	}
	if n <= chunk {
		b, err := c.next(int64(n))
		if err != nil {
			return "", err
		}
		return string(b), nil
	}
	// A Builder grown once keeps its one allocation as the string.
	var sb strings.Builder
	sb.Grow(int(n))
	for left := int64(n); left > 0; {
		b, err := c.next(min(left, chunk))
		if err != nil {
			return "", err
		}
		sb.Write(b)
		left -= int64(len(b))
	}
	return sb.String(), nil
}

func (c *cursor) parse() (*File, error) {
	c.field = "magic"
	b, err := c.next(4)
	if err != nil {
		return nil, err
	}
	if string(b) != Magic {
		return nil, c.fail(0, ErrFormat, "expected magic %q, found %q: not a GGUF file", Magic, b)
	}
	c.field = "version"
	version, err := c.u32()
	if err != nil {
		return nil, err
	}
	switch {
	case version == 2 || version == 3:
	case version == 1:
		return nil, c.fail(4, ErrFormat, "GGUF version 1 (32-bit counts) is obsolete and not supported; re-convert the model")
	case version&0xFFFF == 0 && version>>16 != 0:
		return nil, c.fail(4, ErrFormat, "version field %#x looks byte-swapped: big-endian GGUF is not supported", version)
	default:
		return nil, c.fail(4, ErrFormat, "expected version 2 or 3, found %d", version)
	}
	f := &File{Version: version, Size: c.size, Alignment: DefaultAlignment}

	c.field = "tensor count"
	at := c.off
	nTensors, err := c.u64()
	if err != nil {
		return nil, err
	}
	if nTensors > uint64(c.remaining()/minTensorBytes) {
		return nil, c.tooMany(at, nTensors, minTensorBytes, "tensors")
	}
	c.field = "metadata count"
	at = c.off
	nKV, err := c.u64()
	if err != nil {
		return nil, err
	}
	if nKV > uint64(c.remaining()/minKVBytes) {
		return nil, c.tooMany(at, nKV, minKVBytes, "metadata entries")
	}

	if err := c.chargeMul(at, nKV, kvCost); err != nil {
		return nil, err
	}
	f.Metadata = make([]KV, 0, nKV)
	f.index = make(map[string]int, nKV)
	for i := uint64(0); i < nKV; i++ {
		c.field = fmt.Sprintf("metadata entry %d key", i)
		keyAt := c.off
		key, err := c.str()
		if err != nil {
			return nil, err
		}
		if _, dup := f.index[key]; dup {
			return nil, c.fail(keyAt, ErrFormat, "duplicate metadata key %q", key)
		}
		c.field = fmt.Sprintf("metadata %q", key)
		tagAt := c.off
		tag, err := c.u32()
		if err != nil {
			return nil, err
		}
		v, err := c.value(ValueType(tag), tagAt, 0)
		if err != nil {
			return nil, err
		}
		f.index[key] = len(f.Metadata)
		f.Metadata = append(f.Metadata, KV{Key: key, Value: v})
	}

	if v, ok := f.Lookup("general.alignment"); ok {
		c.field = "metadata \"general.alignment\""
		if v.Type() != Uint32 {
			return nil, c.fail(0, ErrFormat, "general.alignment must be a uint32, found a %s", v.Type())
		}
		a, _ := v.AsUint()
		if a == 0 || a&(a-1) != 0 {
			return nil, c.fail(0, ErrFormat, "general.alignment %d is not a power of two", a)
		}
		f.Alignment = a
	}

	if err := c.tensors(f, nTensors); err != nil {
		return nil, err
	}
	return f, nil
}

func (c *cursor) value(t ValueType, at int64, depth int) (Value, error) {
	switch size := t.fixedSize(); {
	case size > 0:
		b, err := c.next(int64(size))
		if err != nil {
			return Value{}, err
		}
		var raw [8]byte
		copy(raw[:], b)
		v := Value{typ: t, bits: binary.LittleEndian.Uint64(raw[:])}
		if t.signed() {
			shift := 64 - 8*uint(size)
			v.bits = uint64(int64(v.bits<<shift) >> shift)
		}
		if t == Bool && b[0] > 1 {
			return Value{}, c.fail(c.off-1, ErrFormat, "bool value must be 0 or 1, found %d", b[0])
		}
		return v, nil
	case t == String:
		s, err := c.str()
		return Value{typ: String, str: s}, err
	case t == Array:
		a, err := c.array(depth)
		return Value{typ: Array, arr: a}, err
	}
	return Value{}, c.fail(at, ErrFormat, "unknown value type %d (known types are 0 to 12)", uint32(t))
}

func (c *cursor) array(depth int) (*ArrayValue, error) {
	at := c.off
	if depth >= c.maxDepth {
		return nil, c.fail(at, ErrLimit, "arrays nested deeper than %d levels", c.maxDepth)
	}
	tag, err := c.u32()
	if err != nil {
		return nil, err
	}
	elem := ValueType(tag)
	size := elem.fixedSize()
	if size < 0 {
		return nil, c.fail(at, ErrFormat, "unknown array element type %d (known types are 0 to 12)", tag)
	}
	countAt := c.off
	n, err := c.u64()
	if err != nil {
		return nil, err
	}
	minElem := int64(size)
	switch elem {
	case String:
		minElem = 8
	case Array:
		minElem = 12
	}
	if n > uint64(c.remaining()/minElem) {
		return nil, c.fail(countAt, ErrLimit, "array of %d %s elements cannot fit in the %d bytes left in the file", n, elem, c.remaining())
	}
	if err := c.charge(at, arrayCost); err != nil {
		return nil, err
	}
	a := &ArrayValue{elem: elem, n: int(n)}
	switch elem {
	case String:
		if err := c.chargeMul(countAt, n, 4); err != nil {
			return nil, err
		}
		a.ends = make([]uint32, n)
		for i := range a.ends {
			sAt := c.off
			ln, err := c.u64()
			if err != nil {
				return nil, err
			}
			if ln > uint64(c.remaining()) {
				return nil, c.fail(sAt, ErrLimit, "string %d of the array has length %d, longer than the %d bytes left in the file", i, ln, c.remaining())
			}
			if uint64(len(a.blob))+ln > math.MaxUint32 {
				return nil, c.fail(sAt, ErrLimit, "strings of the array exceed 4 GiB")
			}
			// The blob grows by doubling; every capacity it takes is
			// charged, since the one it leaves is garbage not yet freed.
			if need := len(a.blob) + int(ln); need > cap(a.blob) {
				grown := max(need, 2*cap(a.blob), 4096)
				if err := c.charge(sAt, int64(grown)); err != nil {
					return nil, err
				}
				a.blob = slices.Grow(a.blob, grown-len(a.blob))
			}
			pos := len(a.blob)
			a.blob = a.blob[:pos+int(ln)]
			if err := c.copyTo(a.blob[pos:]); err != nil {
				return nil, err
			}
			a.ends[i] = uint32(len(a.blob))
		}
		a.blob = a.blob[:len(a.blob):len(a.blob)]
	case Array:
		// Each element's slot here; each sub-array charges its own struct.
		if err := c.chargeMul(countAt, n, valueCost); err != nil {
			return nil, err
		}
		a.sub = make([]Value, n)
		for i := range a.sub {
			sub, err := c.array(depth + 1)
			if err != nil {
				return nil, err
			}
			a.sub[i] = Value{typ: Array, arr: sub}
		}
	default:
		total := int64(n) * int64(size)
		if err := c.charge(countAt, total); err != nil {
			return nil, err
		}
		a.raw = make([]byte, total)
		if err := c.copyTo(a.raw); err != nil {
			return nil, err
		}
		if elem == Bool {
			for i, x := range a.raw {
				if x > 1 {
					return nil, c.fail(c.off-total+int64(i), ErrFormat, "bool element %d must be 0 or 1, found %d", i, x)
				}
			}
		}
	}
	return a, nil
}

func (c *cursor) tensors(f *File, n uint64) error {
	c.field = "tensor descriptions"
	if err := c.chargeMul(c.off, n, tensorCost+shapeCost); err != nil {
		return err
	}
	f.Tensors = make([]TensorInfo, n)
	starts := make([]int64, n) // where each description begins, for errors
	names := make(map[string]int, n)
	for i := range f.Tensors {
		t := &f.Tensors[i]
		starts[i] = c.off
		c.field = fmt.Sprintf("tensor %d name", i)
		name, err := c.str()
		if err != nil {
			return err
		}
		if len(name) > MaxNameLen {
			return c.fail(starts[i], ErrFormat, "tensor name of %d bytes is longer than ggml's %d", len(name), MaxNameLen)
		}
		if j, dup := names[name]; dup {
			return c.fail(starts[i], ErrFormat, "duplicate tensor name %q (also tensor %d)", name, j)
		}
		names[name] = i
		t.Name = name
		c.field = fmt.Sprintf("tensor %d (%q) dimensions", i, name)
		dimAt := c.off
		nd, err := c.u32()
		if err != nil {
			return err
		}
		if nd == 0 || nd > MaxDims {
			return c.fail(dimAt, ErrFormat, "expected 1 to %d dimensions, found %d", MaxDims, nd)
		}
		t.Shape = make([]uint64, nd)
		elems := uint64(1)
		for d := range t.Shape {
			x, err := c.u64()
			if err != nil {
				return err
			}
			if x > math.MaxInt64 {
				return c.fail(c.off-8, ErrFormat, "dimension %d is %d, larger than ggml's int64", d, x)
			}
			if x != 0 && elems > math.MaxInt64/x {
				return c.fail(c.off-8, ErrFormat, "element count overflows int64 at dimension %d", d)
			}
			elems *= x
			t.Shape[d] = x
		}
		c.field = fmt.Sprintf("tensor %d (%q) type", i, name)
		typeAt := c.off
		typ, err := c.u32()
		if err != nil {
			return err
		}
		t.Type = GGMLType(typ)
		if info, known := t.Type.Info(); !known {
			return c.fail(typeAt, ErrFormat, "unknown ggml type %d", typ)
		} else if info.Removed {
			return c.fail(typeAt, ErrFormat, "ggml type %d (%s) was removed from the GGUF format; re-quantize the model", typ, info.Name)
		} else if t.Shape[0]%info.BlockSize != 0 {
			return c.fail(typeAt, ErrFormat, "first dimension %d is not a multiple of %s's block size %d", t.Shape[0], info.Name, info.BlockSize)
		}
		size, ok := tensorBytes(t.Type, t.Shape)
		if !ok {
			return c.fail(typeAt, ErrFormat, "byte size of shape %v overflows", t.Shape)
		}
		t.Size = size
		c.field = fmt.Sprintf("tensor %d (%q) offset", i, name)
		offAt := c.off
		if t.Offset, err = c.u64(); err != nil {
			return err
		}
		if t.Offset%f.Alignment != 0 {
			return c.fail(offAt, ErrFormat, "data offset %d is not a multiple of the alignment %d", t.Offset, f.Alignment)
		}
	}
	f.DataOffset = int64(align(uint64(c.off), f.Alignment))
	return c.checkLayout(f, starts)
}

// checkLayout verifies that every tensor's data lies inside the file and
// that no two tensors share bytes.
func (c *cursor) checkLayout(f *File, starts []int64) error {
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return f.Tensors[order[a]].Offset < f.Tensors[order[b]].Offset })
	room := uint64(0)
	if f.DataOffset < f.Size {
		room = uint64(f.Size - f.DataOffset)
	}
	var end uint64 // furthest byte reached by the tensors seen so far
	prev := -1     // the tensor that reaches it
	for _, i := range order {
		t := f.Tensors[i]
		c.field = fmt.Sprintf("tensor %d (%q) offset", i, t.Name)
		at := starts[i]
		if t.Offset > room || t.Size > room-t.Offset {
			return c.fail(at, ErrTruncated, "data [%d, %d) of the data region (file bytes %d to %d) extends past the end of the %d-byte file",
				t.Offset, t.Offset+t.Size, uint64(f.DataOffset)+t.Offset, uint64(f.DataOffset)+t.Offset+t.Size, f.Size)
		}
		if t.Size == 0 {
			continue
		}
		if prev >= 0 && t.Offset < end {
			p := f.Tensors[prev]
			return c.fail(at, ErrFormat, "data [%d, %d) overlaps tensor %d (%q) at [%d, %d)", t.Offset, t.Offset+t.Size, prev, p.Name, p.Offset, p.Offset+p.Size)
		}
		end, prev = t.Offset+t.Size, i
	}
	return nil
}
