// Package ggufattack builds the hostile GGUF headers that once broke
// headroom's memory bound, on the fly: a file of hundreds of megabytes
// costs its reader nothing, so a test measures what parsing it allocates
// and nothing else. Tests of the parser, the remote reader and the API
// replay them.
package ggufattack

import (
	"encoding/binary"
	"fmt"
	"io"
)

// The GGUF value type tags and the ggml type the attacks use.
const (
	tagUint8  = 0
	tagUint16 = 2
	tagInt32  = 5
	tagString = 8
	tagArray  = 9
	typeF32   = 0
)

// File is a generated GGUF: Prefix, then Count units of UnitSize bytes
// each written by Unit, then zeros up to Size, with Tail laid over the
// bytes from TailAt.
type File struct {
	Prefix   []byte
	Count    int64
	UnitSize int64
	Unit     func(i int64, dst []byte)
	Size     int64
	Tail     []byte
	TailAt   int64
}

// ReadAt fills p from the generated file.
func (g *File) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("ggufattack: negative offset %d", off)
	}
	n := 0
	var unit []byte
	if g.UnitSize > 0 {
		unit = make([]byte, g.UnitSize)
	}
	start := off
	defer g.overlay(p, start)
	for n < len(p) && off < g.Size {
		switch body := off - int64(len(g.Prefix)); {
		case off < int64(len(g.Prefix)):
			k := copy(p[n:], g.Prefix[off:])
			n, off = n+k, off+int64(k)
		case g.UnitSize > 0 && body < g.Count*g.UnitSize:
			i, at := body/g.UnitSize, body%g.UnitSize
			g.Unit(i, unit)
			k := copy(p[n:], unit[at:])
			n, off = n+k, off+int64(k)
		default:
			k := int(min(int64(len(p)-n), g.Size-off))
			clear(p[n : n+k])
			n, off = n+k, off+int64(k)
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// overlay copies the part of Tail that p, read at off, covers.
func (g *File) overlay(p []byte, off int64) {
	if len(g.Tail) == 0 {
		return
	}
	lo, hi := max(off, g.TailAt), min(off+int64(len(p)), g.TailAt+int64(len(g.Tail)), g.Size)
	if lo < hi {
		copy(p[lo-off:hi-off], g.Tail[lo-g.TailAt:hi-g.TailAt])
	}
}

// header is a GGUF v3 header's start: magic, version, counts, and one key
// with its type tag when key is not empty.
func header(tensors, kvs uint64, key string, tag uint32) []byte {
	b := []byte("GGUF")
	b = binary.LittleEndian.AppendUint32(b, 3)
	b = binary.LittleEndian.AppendUint64(b, tensors)
	b = binary.LittleEndian.AppendUint64(b, kvs)
	if key != "" {
		b = binary.LittleEndian.AppendUint64(b, uint64(len(key)))
		b = append(b, key...)
		b = binary.LittleEndian.AppendUint32(b, tag)
	}
	return b
}

// The attacks' sizes, as the issue found them.
const (
	NestedCount = 5_500_000
	BigValue    = 250 << 20
	TensorCount = 2_700_000
)

// Nested is one array of 5.5M empty sub-arrays: 66 MB of file.
func Nested() *File {
	p := header(0, 1, "k", tagArray)
	p = binary.LittleEndian.AppendUint32(p, tagArray)
	p = binary.LittleEndian.AppendUint64(p, NestedCount)
	return &File{Prefix: p, Count: NestedCount, UnitSize: 12, Size: int64(len(p)) + NestedCount*12 + 4096,
		Unit: func(i int64, dst []byte) {
			binary.LittleEndian.PutUint32(dst, tagUint8)
			binary.LittleEndian.PutUint64(dst[4:], 0)
		}}
}

// BigString is one metadata string of 250 MiB.
func BigString() *File {
	p := binary.LittleEndian.AppendUint64(header(0, 1, "k", tagString), BigValue)
	return &File{Prefix: p, Size: int64(len(p)) + BigValue + 32}
}

// BigBytes is one uint8 array of 250 MiB.
func BigBytes() *File {
	p := binary.LittleEndian.AppendUint32(header(0, 1, "k", tagArray), tagUint8)
	p = binary.LittleEndian.AppendUint64(p, BigValue)
	return &File{Prefix: p, Size: int64(len(p)) + BigValue + 32}
}

// ZeroTensors is 2.7M tensors of no bytes, 40 bytes of description each.
func ZeroTensors() *File {
	p := header(TensorCount, 0, "", 0)
	return &File{Prefix: p, Count: TensorCount, UnitSize: 40, Size: int64(len(p)) + TensorCount*40 + 4096,
		Unit: func(i int64, dst []byte) {
			binary.LittleEndian.PutUint64(dst, 8)
			copy(dst[8:16], fmt.Sprintf("%08d", i))
			binary.LittleEndian.PutUint32(dst[16:], 1)       // dimensions
			binary.LittleEndian.PutUint64(dst[20:], 0)       // ne[0]
			binary.LittleEndian.PutUint32(dst[28:], typeF32) // type
			binary.LittleEndian.PutUint64(dst[32:], 0)       // offset
		}}
}

// SplitShard is shard no (0-based) of count of a split model: the split
// keys, one metadata string of strLen bytes (zeros), and one tensor of
// eight float32s. Four shards with 200 MiB strings once took 833 MB to
// read, eight 1.65 GB: the bound was per file.
func SplitShard(no, count int, strLen int64) *File {
	p := header(1, 4, "split.no", tagUint16)
	p = binary.LittleEndian.AppendUint16(p, uint16(no))
	p = appendKey(p, "split.count", tagUint16)
	p = binary.LittleEndian.AppendUint16(p, uint16(count))
	p = appendKey(p, "split.tensors.count", tagInt32)
	p = binary.LittleEndian.AppendUint32(p, uint32(count))
	p = appendKey(p, "k", tagString)
	p = binary.LittleEndian.AppendUint64(p, uint64(strLen))
	name := fmt.Sprintf("t%d", no)
	tail := binary.LittleEndian.AppendUint64(nil, uint64(len(name)))
	tail = append(tail, name...)
	tail = binary.LittleEndian.AppendUint32(tail, 1) // dimensions
	tail = binary.LittleEndian.AppendUint64(tail, 8)
	tail = binary.LittleEndian.AppendUint32(tail, typeF32)
	tail = binary.LittleEndian.AppendUint64(tail, 0) // offset
	tailAt := int64(len(p)) + strLen
	data := (tailAt + int64(len(tail)) + 31) &^ 31
	return &File{Prefix: p, Tail: tail, TailAt: tailAt, Size: data + 32}
}

func appendKey(b []byte, key string, tag uint32) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(key)))
	b = append(b, key...)
	return binary.LittleEndian.AppendUint32(b, tag)
}

// All are the attacks by name.
func All() map[string]*File {
	return map[string]*File{"nested arrays": Nested(), "250 MiB string": BigString(),
		"250 MiB uint8 array": BigBytes(), "zero-size tensors": ZeroTensors()}
}
