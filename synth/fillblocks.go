package synth

import (
	"encoding/binary"
	"math"

	"github.com/headroom-llm/headroom/gguf"
)

// The block layouts follow the structs of ggml's ggml-common.h and the
// dequantizers of ggml-quants.c. Fill draws every byte of a block at
// random and then a blockEncoder's fix rewrites the fields random bytes
// would make unusable: the f16 scales (a random half may be NaN, infinite
// or subnormal, or dwarf the other weights) and quants that ggml's
// kernels do not expect. Each fix reads its jitter from the block's own
// random bytes before overwriting them, so it needs no generator.
//
// The scales are picked so that the dequantized weights have a standard
// deviation near 0.02: for uniform quants of b bits, the spread of q about
// its centre is about 2^b/sqrt(12), and the scale is a power of two near
// 0.02 over that (times the sub-block scale where there is one).

// blockEncoder fixes up one block of random bytes of a quantized type.
type blockEncoder struct {
	size int
	fix  func(blk []byte)
}

var blockEncoders = map[gguf.GGMLType]blockEncoder{
	gguf.TypeQ8_0:  {34, fixQ8_0},
	gguf.TypeQ4_0:  {18, func(b []byte) { putHalf(b, scaleHalf(-8, b[0])) }},
	gguf.TypeQ4_1:  {20, func(b []byte) { fixMin(b, -8, 7.5) }},
	gguf.TypeQ5_0:  {22, func(b []byte) { putHalf(b, scaleHalf(-9, b[0])) }},
	gguf.TypeQ5_1:  {24, func(b []byte) { fixMin(b, -9, 15.5) }},
	gguf.TypeQ4_K:  {144, func(b []byte) { fixK(b, -12, 7.5) }},
	gguf.TypeQ5_K:  {176, func(b []byte) { fixK(b, -13, 15.5) }},
	gguf.TypeQ6_K:  {210, fixQ6_K},
	gguf.TypeMXFP4: {17, fixMXFP4},
}

// scaleHalf is 2^exp times a jitter in [1, 1.5) taken from a random byte:
// a normal half whose nine mantissa bits hold it exactly.
func scaleHalf(exp int, jitter byte) float32 {
	return float32(math.Ldexp(1+float64(jitter)/512, exp))
}

func putHalf(b []byte, f float32) { binary.LittleEndian.PutUint16(b, f16bits(f)) }

// fixQ8_0: block_q8_0 is d, then 32 int8 quants. The quantizer never
// writes -128, and the x86 dot products take absolute values in int8
// (which -128 has none of), so it becomes -127.
func fixQ8_0(b []byte) {
	putHalf(b, scaleHalf(-12, b[0]))
	for i := 2; i < len(b); i++ {
		if b[i] == 0x80 {
			b[i] = 0x81
		}
	}
}

// fixMin: block_q4_1 and block_q5_1 are d and m, then quants, and hold
// d*q + m; an m of -centre*d centres the unsigned quants on zero.
func fixMin(b []byte, exp int, centre float32) {
	d := scaleHalf(exp, b[0])
	putHalf(b, d)
	putHalf(b[2:], -centre*d)
}

// fixK: block_q4_K and block_q5_K are d, dmin, twelve bytes packing eight
// 6-bit sub-block scales and eight 6-bit mins, then the quants. A weight
// is d*sc*q - dmin*m; with m = sc and dmin = centre*d that is
// d*sc*(q - centre), centred on zero. The scales are 16 to 31, as a
// quantizer spreading a block over the 6 bits might write.
func fixK(b []byte, exp int, centre float32) {
	d := scaleHalf(exp, b[0])
	putHalf(b, d)
	putHalf(b[2:], centre*d)
	var sc [8]uint8
	for j := range sc {
		sc[j] = 16 + b[4+j]&15
	}
	packScalesK(b[4:16], sc, sc)
}

// packScalesK writes sc and m as ggml's get_scale_min_k4 reads them: the
// first four of each in the low 6 bits of bytes 0-3 and 4-7, the last four
// split into low nibbles in bytes 8-11 and their top 2 bits in the top
// bits of bytes 0-3 (scales) and 4-7 (mins).
func packScalesK(q []byte, sc, m [8]uint8) {
	for j := range 4 {
		q[j] = sc[j]&63 | (sc[j+4]>>4)<<6
		q[j+4] = m[j]&63 | (m[j+4]>>4)<<6
		q[j+8] = sc[j+4]&15 | (m[j+4]&15)<<4
	}
}

// fixQ6_K: block_q6_K is 128 bytes of low nibbles, 64 of high bit pairs,
// sixteen int8 sub-block scales and d, and holds d*sc*(q - 32). The
// scales are 4 to 11: with sub-block scales near 20 the d that gives
// weights of 0.02 would be a subnormal half.
func fixQ6_K(b []byte) {
	for j := 192; j < 208; j++ {
		b[j] = 4 + b[j]&7
	}
	putHalf(b[208:], scaleHalf(-13, b[208]))
}

// fixMXFP4: block_mxfp4 is an E8M0 exponent e, then sixteen bytes of
// nibbles indexing ggml's doubled E2M1 values (up to 12), and holds
// value*2^(e-128). e of 119 or 120 scales them to about 0.02; e stays far
// from the values below 2 that ggml decodes as subnormals.
func fixMXFP4(b []byte) { b[0] = 119 + b[0]&1 }
