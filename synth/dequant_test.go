package synth

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/headroom-llm/headroom/gguf"
)

// The dequantizers below are written from ggml's dequantize_row_* and
// share nothing with the encoders they check. Each returns the block's
// weights and its scale fields as halves, so a test can hold the halves
// to being normal.

// half decodes IEEE half bits, and reports whether they are a finite
// normal number or zero.
func half(h uint16) (v float64, normal bool) {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, mant := int(h>>10&31), float64(h&1023)
	switch exp {
	case 0:
		return sign * math.Ldexp(mant, -24), mant == 0
	case 31:
		return math.NaN(), false
	}
	return sign * math.Ldexp(1+mant/1024, exp-15), true
}

func le16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }

// dequant returns the weights of a buffer of whole blocks of t, and an
// error naming the last field a kernel could not take: a scale half that
// is not a normal number, or a Q8_0 quant of -128.
func dequant(t gguf.GGMLType, b []byte) ([]float64, error) {
	var out []float64
	var bad error
	scale := func(at int, h uint16) float64 {
		v, ok := half(h)
		if (!ok || v == 0) && bad == nil {
			bad = fmt.Errorf("%s scale at byte %d is %#04x, not a normal half", t, at, h)
		}
		return v
	}
	info, _ := t.Info()
	n := int(info.TypeSize)
	for at := 0; at+n <= len(b); at += n {
		blk := b[at : at+n]
		switch t {
		case gguf.TypeF32:
			out = append(out, float64(math.Float32frombits(binary.LittleEndian.Uint32(blk))))
		case gguf.TypeF16:
			v, _ := half(le16(blk))
			out = append(out, v)
		case gguf.TypeBF16:
			out = append(out, float64(math.Float32frombits(uint32(le16(blk))<<16)))
		case gguf.TypeQ8_0:
			d := scale(at, le16(blk))
			for _, q := range blk[2:34] {
				if q == 0x80 {
					bad = fmt.Errorf("Q8_0 quant -128 at block byte %d, which the quantizer never writes", at)
				}
				out = append(out, d*float64(int8(q)))
			}
		case gguf.TypeQ4_0, gguf.TypeQ4_1:
			d, m, qs := scale(at, le16(blk)), -8.0, blk[2:18]
			if t == gguf.TypeQ4_1 {
				m, qs = scale(at+2, le16(blk[2:]))/d, blk[4:20]
			}
			lo, hi := make([]float64, 16), make([]float64, 16)
			for j, q := range qs {
				lo[j], hi[j] = d*(float64(q&15)+m), d*(float64(q>>4)+m)
			}
			out = append(append(out, lo...), hi...)
		case gguf.TypeQ5_0, gguf.TypeQ5_1:
			d, m, rest := scale(at, le16(blk)), -16.0, blk[2:]
			if t == gguf.TypeQ5_1 {
				m, rest = scale(at+2, le16(blk[2:]))/d, blk[4:]
			}
			qh, qs := binary.LittleEndian.Uint32(rest), rest[4:20]
			lo, hi := make([]float64, 16), make([]float64, 16)
			for j, q := range qs {
				l := float64(q&15) + float64(qh>>j&1)*16
				h := float64(q>>4) + float64(qh>>(j+16)&1)*16
				lo[j], hi[j] = d*(l+m), d*(h+m)
			}
			out = append(append(out, lo...), hi...)
		case gguf.TypeQ4_K, gguf.TypeQ5_K:
			out = append(out, dequantK(t, blk, scale(at, le16(blk)), scale(at+2, le16(blk[2:])))...)
		case gguf.TypeQ6_K:
			out = append(out, dequantQ6K(blk, scale(at+208, le16(blk[208:])))...)
		case gguf.TypeMXFP4:
			fp4 := [16]float64{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
			if blk[0] < 2 || blk[0] == 255 {
				bad = fmt.Errorf("MXFP4 exponent %d at byte %d is subnormal or NaN", blk[0], at)
			}
			d := math.Ldexp(1, int(blk[0])-128)
			lo, hi := make([]float64, 16), make([]float64, 16)
			for j, q := range blk[1:17] {
				lo[j], hi[j] = d*fp4[q&15], d*fp4[q>>4]
			}
			out = append(append(out, lo...), hi...)
		default:
			return nil, fmt.Errorf("no test dequantizer for %s", t)
		}
	}
	return out, bad
}

// scaleMin6 reads sub-block j's 6-bit scale and min from the 12 packed
// bytes of a Q4_K or Q5_K block.
func scaleMin6(q []byte, j int) (sc, m float64) {
	if j < 4 {
		return float64(q[j] & 63), float64(q[j+4] & 63)
	}
	return float64(q[j+4]&15 | q[j-4]>>6<<4), float64(q[j+4]>>4 | q[j]>>6<<4)
}

// dequantK decodes a Q4_K or Q5_K block: eight sub-blocks of 32, each
// d*sc*q - dmin*m, the Q5_K quants taking a fifth bit from qh.
func dequantK(t gguf.GGMLType, blk []byte, d, dmin float64) []float64 {
	scales, qs, qh := blk[4:16], blk[16:144], []byte(nil)
	if t == gguf.TypeQ5_K {
		qh, qs = blk[16:48], blk[48:176]
	}
	out := make([]float64, 0, 256)
	for j := range 8 {
		sc, m := scaleMin6(scales, j)
		pair := qs[j/2*32 : j/2*32+32]
		for l, q := range pair {
			v := float64(q & 15)
			if j%2 == 1 {
				v = float64(q >> 4)
			}
			if qh != nil && qh[l]>>j&1 == 1 {
				v += 16
			}
			out = append(out, d*sc*v-dmin*m)
		}
	}
	return out
}

// dequantQ6K decodes a Q6_K block: two halves of 128, each from 64 bytes
// of low nibbles, 32 bytes of high bit pairs and eight int8 scales.
func dequantQ6K(blk []byte, d float64) []float64 {
	out := make([]float64, 256)
	for n := range 2 {
		ql, qh, sc := blk[n*64:n*64+64], blk[128+n*32:128+n*32+32], blk[192+n*8:192+n*8+8]
		y := out[n*128 : n*128+128]
		for l := range 32 {
			is := l / 16
			q := [4]int{
				int(ql[l]&15 | (qh[l]&3)<<4),
				int(ql[l+32]&15 | (qh[l]>>2&3)<<4),
				int(ql[l]>>4 | (qh[l]>>4&3)<<4),
				int(ql[l+32]>>4 | (qh[l]>>6&3)<<4),
			}
			for k := range 4 {
				y[l+32*k] = d * float64(int8(sc[is+2*k])) * float64(q[k]-32)
			}
		}
	}
	return out
}
