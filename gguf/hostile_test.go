package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// raw assembles header bytes by hand, for headers the Builder refuses to write.
type raw struct{ bytes.Buffer }

func (r *raw) u32(x uint32) *raw { binary.Write(&r.Buffer, binary.LittleEndian, x); return r }
func (r *raw) u64(x uint64) *raw { binary.Write(&r.Buffer, binary.LittleEndian, x); return r }
func (r *raw) str(s string) *raw { r.u64(uint64(len(s))); r.WriteString(s); return r }
func (r *raw) head(nt, nkv uint64) *raw {
	r.WriteString("GGUF")
	return r.u32(3).u64(nt).u64(nkv)
}

// tensor writes one tensor description.
func (r *raw) tensor(name string, typ GGMLType, off uint64, shape ...uint64) *raw {
	r.str(name).u32(uint32(len(shape)))
	for _, d := range shape {
		r.u64(d)
	}
	return r.u32(uint32(typ)).u64(off)
}

// padded returns the bytes followed by n bytes of (zero) data region, with the
// header padded to 32.
func (r *raw) padded(n int) []byte {
	b := r.Bytes()
	for len(b)%32 != 0 {
		b = append(b, 0)
	}
	return append(b, make([]byte, n)...)
}

func TestHostileHeaders(t *testing.T) {
	valid, err := sample(t).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		data   []byte
		is     error
		offset int64  // expected FormatError offset, -1 to skip
		says   string // expected in the message
	}{
		{"empty file", nil, ErrTruncated, 0, "need 4 bytes"},
		{"not gguf", []byte("PK\x03\x04 zip file here"), ErrFormat, 0, `expected magic "GGUF"`},
		{"version 1", new(raw).head(0, 0).Bytes()[:4:4], ErrTruncated, 4, "version"},
		{"old version", append([]byte("GGUF"), 1, 0, 0, 0), ErrFormat, 4, "version 1"},
		{"big endian", append([]byte("GGUF"), 0, 0, 0, 3), ErrFormat, 4, "big-endian"},
		{"future version", append([]byte("GGUF"), 9, 0, 0, 0), ErrFormat, 4, "found 9"},
		{"2^60 tensors", new(raw).head(1<<60, 0).Bytes(), ErrLimit, 8, "1152921504606846976 tensors"},
		{"2^60 metadata", new(raw).head(0, 1<<60).Bytes(), ErrLimit, 16, "metadata entries"},
		{"2^40 byte key", new(raw).head(0, 1).u64(1 << 40).padded(64), ErrLimit, 24, "string length 1099511627776"},
		{"2^40 byte string value", new(raw).head(0, 1).str("k").u32(uint32(String)).u64(1 << 40).Bytes(), ErrLimit, 37, "string length 1099511627776"},
		{"2^62 element array", new(raw).head(0, 1).str("k").u32(uint32(Array)).u32(uint32(Uint64)).u64(1 << 62).Bytes(), ErrLimit, 41, "array of 4611686018427387904"},
		{"2^40 byte string in array", new(raw).head(0, 1).str("k").u32(uint32(Array)).u32(uint32(String)).u64(1).u64(1 << 40).Bytes(), ErrLimit, 49, "length 1099511627776"},
		{"unknown value type", new(raw).head(0, 1).str("k").u32(99).Bytes(), ErrFormat, 33, "unknown value type 99"},
		{"unknown array type", new(raw).head(0, 1).str("k").u32(uint32(Array)).u32(77).u64(0).Bytes(), ErrFormat, 37, "unknown array element type 77"},
		{"bad bool", new(raw).head(0, 1).str("k").u32(uint32(Bool)).Bytes(), ErrTruncated, 37, "need 1 bytes"},
		{"bool 2", append(new(raw).head(0, 1).str("k").u32(uint32(Bool)).Bytes(), 2), ErrFormat, 37, "0 or 1"},
		{"duplicate key", append(new(raw).head(0, 2).str("k").u32(uint32(Uint8)).Bytes(), append([]byte{1}, new(raw).str("k").u32(uint32(Uint8)).Bytes()...)...), ErrFormat, 38, `duplicate metadata key "k"`},
		{"alignment not u32", new(raw).head(0, 1).str("general.alignment").u32(uint32(Uint64)).u64(64).padded(0), ErrFormat, -1, "must be a uint32"},
		{"alignment 48", new(raw).head(0, 1).str("general.alignment").u32(uint32(Uint32)).u32(48).padded(0), ErrFormat, -1, "not a power of two"},
		{"unknown tensor type", new(raw).head(1, 0).tensor("w", 99, 0, 32).padded(128), ErrFormat, -1, "unknown ggml type 99"},
		{"removed tensor type", new(raw).head(1, 0).tensor("w", 31, 0, 32).padded(128), ErrFormat, -1, "Q4_0_4_4"},
		{"five dims", new(raw).head(1, 0).tensor("w", TypeF32, 0, 1, 1, 1, 1, 1).padded(128), ErrFormat, -1, "1 to 4 dimensions, found 5"},
		{"zero dims", new(raw).head(1, 0).tensor("w", TypeF32, 0).padded(128), ErrFormat, -1, "found 0"},
		{"partial block", new(raw).head(1, 0).tensor("w", TypeQ4_K, 0, 100).padded(1024), ErrFormat, -1, "not a multiple of Q4_K's block size 256"},
		{"shape overflow", new(raw).head(1, 0).tensor("w", TypeF32, 0, 1<<40, 1<<40).padded(128), ErrFormat, -1, "overflows"},
		{"negative dim", new(raw).head(1, 0).tensor("w", TypeF32, 0, 1<<63).padded(128), ErrFormat, -1, "larger than ggml's int64"},
		{"unaligned offset", new(raw).head(1, 0).tensor("w", TypeF32, 4, 8).padded(128), ErrFormat, -1, "not a multiple of the alignment 32"},
		{"offset past end", new(raw).head(1, 0).tensor("w", TypeF32, 1<<40, 8).padded(128), ErrTruncated, -1, "extends past the end"},
		{"data past end", new(raw).head(1, 0).tensor("w", TypeF32, 0, 64).padded(100), ErrTruncated, -1, "extends past the end"},
		{"overlap", new(raw).head(2, 0).tensor("a", TypeF32, 0, 64).tensor("b", TypeF32, 128, 8).padded(512), ErrFormat, -1, `overlaps tensor 0 ("a")`},
		{"duplicate tensor", new(raw).head(2, 0).tensor("a", TypeF32, 0, 8).tensor("a", TypeF32, 32, 8).padded(512), ErrFormat, -1, `duplicate tensor name "a"`},
		{"long name", new(raw).head(1, 0).tensor(strings.Repeat("x", 64), TypeF32, 0, 8).padded(128), ErrFormat, -1, "longer than ggml's 63"},
		{"truncated in tensors", valid[:len(valid)/8], ErrTruncated, -1, ""},
		{"deep nesting", deepArray(20), ErrLimit, -1, "nested deeper than 8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Read(bytes.NewReader(tc.data), int64(len(tc.data)))
			if err == nil {
				t.Fatalf("accepted: %+v", f)
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("error %q does not wrap %v", err, tc.is)
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T is not a *FormatError: %v", err, err)
			}
			if tc.offset >= 0 && fe.Offset != tc.offset {
				t.Errorf("offset %d, want %d (%v)", fe.Offset, tc.offset, err)
			}
			if !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "at offset") {
				t.Errorf("error %q should say %q and where", err, tc.says)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

func deepArray(depth int) []byte {
	r := new(raw).head(0, 1).str("k").u32(uint32(Array))
	for range depth {
		r.u32(uint32(Array)).u64(1)
	}
	return r.u32(uint32(Uint8)).u64(0).Bytes()
}

// TestAllocationBound checks that a header claiming more memory than the bound
// fails before allocating, even when the file really is that large (a sparse
// reader that reports a huge size).
func TestAllocationBound(t *testing.T) {
	hdr := new(raw).head(0, 1).str("k").u32(uint32(Array)).u32(uint32(Uint8)).u64(300 << 20).Bytes()
	r := &hugeReader{prefix: hdr, size: 1 << 40}
	_, err := ReadWith(r, r.size, Options{})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "allocation bound") {
		t.Fatalf("want allocation bound error, got %v", err)
	}
	if r.read > 1<<20 {
		t.Errorf("read %d bytes before refusing", r.read)
	}
	// The same header with a smaller bound and a smaller claim.
	_, err = ReadWith(r, r.size, Options{MaxAlloc: 1 << 20})
	if !errors.Is(err, ErrLimit) {
		t.Fatalf("bound of 1 MiB not enforced: %v", err)
	}
}

// hugeReader is a file of a given size whose bytes after prefix are zero.
type hugeReader struct {
	prefix []byte
	size   int64
	read   int64
}

func (h *hugeReader) ReadAt(p []byte, off int64) (int, error) {
	h.read += int64(len(p))
	for i := range p {
		p[i] = 0
	}
	if off < int64(len(h.prefix)) {
		copy(p, h.prefix[off:])
	}
	return len(p), nil
}
