package gguf

import (
	"fmt"
	"math/bits"
	"strings"
)

// GGMLType is a tensor storage type as numbered in ggml's enum ggml_type.
// The numbers are part of the file format: they never change, and removed
// types leave holes.
type GGMLType uint32

// The ggml tensor types that GGUF files may hold.
const (
	TypeF32     GGMLType = 0
	TypeF16     GGMLType = 1
	TypeQ4_0    GGMLType = 2
	TypeQ4_1    GGMLType = 3
	TypeQ5_0    GGMLType = 6
	TypeQ5_1    GGMLType = 7
	TypeQ8_0    GGMLType = 8
	TypeQ8_1    GGMLType = 9
	TypeQ2_K    GGMLType = 10
	TypeQ3_K    GGMLType = 11
	TypeQ4_K    GGMLType = 12
	TypeQ5_K    GGMLType = 13
	TypeQ6_K    GGMLType = 14
	TypeQ8_K    GGMLType = 15
	TypeIQ2_XXS GGMLType = 16
	TypeIQ2_XS  GGMLType = 17
	TypeIQ3_XXS GGMLType = 18
	TypeIQ1_S   GGMLType = 19
	TypeIQ4_NL  GGMLType = 20
	TypeIQ3_S   GGMLType = 21
	TypeIQ2_S   GGMLType = 22
	TypeIQ4_XS  GGMLType = 23
	TypeI8      GGMLType = 24
	TypeI16     GGMLType = 25
	TypeI32     GGMLType = 26
	TypeI64     GGMLType = 27
	TypeF64     GGMLType = 28
	TypeIQ1_M   GGMLType = 29
	TypeBF16    GGMLType = 30
	TypeTQ1_0   GGMLType = 34
	TypeTQ2_0   GGMLType = 35
	TypeMXFP4   GGMLType = 39
	TypeNVFP4   GGMLType = 40
	TypeQ1_0    GGMLType = 41
	TypeQ2_0    GGMLType = 42
)

// TypeInfo describes how ggml stores one type: elements per block and bytes
// per block. A row of n elements takes n/BlockSize*TypeSize bytes.
type TypeInfo struct {
	Name      string
	BlockSize uint64
	TypeSize  uint64
	Quantized bool
	// Removed marks numbers that once named a type and that current ggml
	// refuses to load from a GGUF file (the Q4_0_4_4 family of repacked
	// layouts, which became runtime-only repacking).
	Removed bool
}

// qk is QK_K, the super-block size of the K and most IQ quants.
const qk = 256

// typeTable follows ggml's type traits (ggml/src/ggml.c and the block
// structs of ggml-common.h). Block sizes and bytes are derived from the
// struct layouts, noted per entry, so a reader can check them by eye.
var typeTable = map[GGMLType]TypeInfo{
	TypeF32:  {Name: "F32", BlockSize: 1, TypeSize: 4},
	TypeF16:  {Name: "F16", BlockSize: 1, TypeSize: 2},
	TypeBF16: {Name: "BF16", BlockSize: 1, TypeSize: 2},
	TypeF64:  {Name: "F64", BlockSize: 1, TypeSize: 8},
	TypeI8:   {Name: "I8", BlockSize: 1, TypeSize: 1},
	TypeI16:  {Name: "I16", BlockSize: 1, TypeSize: 2},
	TypeI32:  {Name: "I32", BlockSize: 1, TypeSize: 4},
	TypeI64:  {Name: "I64", BlockSize: 1, TypeSize: 8},

	TypeQ4_0: {Name: "Q4_0", BlockSize: 32, TypeSize: 2 + 16, Quantized: true},           // d, qs[16]
	TypeQ4_1: {Name: "Q4_1", BlockSize: 32, TypeSize: 4 + 16, Quantized: true},           // d, m, qs[16]
	TypeQ5_0: {Name: "Q5_0", BlockSize: 32, TypeSize: 2 + 4 + 16, Quantized: true},       // d, qh[4], qs[16]
	TypeQ5_1: {Name: "Q5_1", BlockSize: 32, TypeSize: 4 + 4 + 16, Quantized: true},       // d, m, qh[4], qs[16]
	TypeQ8_0: {Name: "Q8_0", BlockSize: 32, TypeSize: 2 + 32, Quantized: true},           // d, qs[32]
	TypeQ8_1: {Name: "Q8_1", BlockSize: 32, TypeSize: 4 + 32, Quantized: true},           // d, s, qs[32]
	TypeQ2_K: {Name: "Q2_K", BlockSize: qk, TypeSize: 16 + 64 + 4, Quantized: true},      // scales[16], qs[64], d, dmin
	TypeQ3_K: {Name: "Q3_K", BlockSize: qk, TypeSize: 32 + 64 + 12 + 2, Quantized: true}, // hmask[32], qs[64], scales[12], d
	TypeQ4_K: {Name: "Q4_K", BlockSize: qk, TypeSize: 4 + 12 + 128, Quantized: true},     // d, dmin, scales[12], qs[128]
	TypeQ5_K: {Name: "Q5_K", BlockSize: qk, TypeSize: 4 + 12 + 32 + 128, Quantized: true},
	TypeQ6_K: {Name: "Q6_K", BlockSize: qk, TypeSize: 128 + 64 + 16 + 2, Quantized: true}, // ql, qh, scales, d
	TypeQ8_K: {Name: "Q8_K", BlockSize: qk, TypeSize: 4 + 256 + 32, Quantized: true},      // float d, qs, bsums[16]

	TypeIQ2_XXS: {Name: "IQ2_XXS", BlockSize: qk, TypeSize: 2 + 64, Quantized: true},            // d, qs[32] u16
	TypeIQ2_XS:  {Name: "IQ2_XS", BlockSize: qk, TypeSize: 2 + 64 + 8, Quantized: true},         // d, qs[32] u16, scales[8]
	TypeIQ2_S:   {Name: "IQ2_S", BlockSize: qk, TypeSize: 2 + 64 + 8 + 8, Quantized: true},      // d, qs[64], qh[8], scales[8]
	TypeIQ3_XXS: {Name: "IQ3_XXS", BlockSize: qk, TypeSize: 2 + 96, Quantized: true},            // d, qs[96]
	TypeIQ3_S:   {Name: "IQ3_S", BlockSize: qk, TypeSize: 2 + 64 + 8 + 32 + 4, Quantized: true}, // d, qs, qh, signs, scales
	TypeIQ1_S:   {Name: "IQ1_S", BlockSize: qk, TypeSize: 2 + 32 + 16, Quantized: true},         // d, qs[32], qh[8] u16
	TypeIQ1_M:   {Name: "IQ1_M", BlockSize: qk, TypeSize: 32 + 16 + 8, Quantized: true},         // qs[32], qh[16], scales[8]
	TypeIQ4_NL:  {Name: "IQ4_NL", BlockSize: 32, TypeSize: 2 + 16, Quantized: true},             // d, qs[16]
	TypeIQ4_XS:  {Name: "IQ4_XS", BlockSize: qk, TypeSize: 2 + 2 + 4 + 128, Quantized: true},    // d, scales_h, scales_l[4], qs[128]

	TypeTQ1_0: {Name: "TQ1_0", BlockSize: qk, TypeSize: 48 + 4 + 2, Quantized: true}, // qs[(256-16)/5], qh[4], d
	TypeTQ2_0: {Name: "TQ2_0", BlockSize: qk, TypeSize: 64 + 2, Quantized: true},     // qs[64], d

	TypeMXFP4: {Name: "MXFP4", BlockSize: 32, TypeSize: 1 + 16, Quantized: true}, // e (E8M0), qs[16]
	TypeNVFP4: {Name: "NVFP4", BlockSize: 64, TypeSize: 4 + 32, Quantized: true}, // d[4] (UE4M3), qs[32]
	TypeQ1_0:  {Name: "Q1_0", BlockSize: 128, TypeSize: 2 + 16, Quantized: true}, // d, qs[16]
	TypeQ2_0:  {Name: "Q2_0", BlockSize: 64, TypeSize: 2 + 16, Quantized: true},  // d, qs[16]

	// Numbers retired from the file format; kept so an error can name them.
	4:  {Name: "Q4_2", BlockSize: 32, TypeSize: 2 + 16, Quantized: true, Removed: true},
	5:  {Name: "Q4_3", BlockSize: 32, TypeSize: 4 + 16, Quantized: true, Removed: true},
	31: {Name: "Q4_0_4_4", BlockSize: 32, TypeSize: 18, Quantized: true, Removed: true},
	32: {Name: "Q4_0_4_8", BlockSize: 32, TypeSize: 18, Quantized: true, Removed: true},
	33: {Name: "Q4_0_8_8", BlockSize: 32, TypeSize: 18, Quantized: true, Removed: true},
	36: {Name: "IQ4_NL_4_4", BlockSize: 32, TypeSize: 18, Quantized: true, Removed: true},
	37: {Name: "IQ4_NL_4_8", BlockSize: 32, TypeSize: 18, Quantized: true, Removed: true},
	38: {Name: "IQ4_NL_8_8", BlockSize: 32, TypeSize: 18, Quantized: true, Removed: true},
}

// Info returns the storage description of t. ok is false for numbers ggml
// never assigned; removed types return their old description with Removed set.
func (t GGMLType) Info() (info TypeInfo, ok bool) {
	info, ok = typeTable[t]
	return info, ok
}

// Valid reports whether t is a type current ggml loads from a GGUF file.
func (t GGMLType) Valid() bool {
	info, ok := typeTable[t]
	return ok && !info.Removed
}

// String returns ggml's upper-case name of the type, or TYPE(n) if unknown.
func (t GGMLType) String() string {
	if info, ok := typeTable[t]; ok {
		return info.Name
	}
	return fmt.Sprintf("TYPE(%d)", uint32(t))
}

// ParseGGMLType finds a type by its name, ignoring case ("q4_k" is Q4_K).
func ParseGGMLType(name string) (GGMLType, bool) {
	for t, info := range typeTable {
		if !info.Removed && strings.EqualFold(info.Name, name) {
			return t, true
		}
	}
	return 0, false
}

// Types lists every type current ggml loads, in enum order.
func Types() []GGMLType {
	var out []GGMLType
	for t := GGMLType(0); t < 64; t++ {
		if t.Valid() {
			out = append(out, t)
		}
	}
	return out
}

// RowSize returns the bytes of a row of n elements of type t, as ggml_row_size
// does. ok is false when t is not a loadable type or n is not a whole number
// of blocks.
func (t GGMLType) RowSize(n uint64) (size uint64, ok bool) {
	info, known := typeTable[t]
	if !known || info.Removed || n%info.BlockSize != 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(n/info.BlockSize, info.TypeSize)
	if hi != 0 {
		return 0, false
	}
	return lo, true
}
