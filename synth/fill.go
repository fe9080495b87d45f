package synth

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/headroom-llm/headroom/gguf"
)

// Weights says which tensors of a written file hold data instead of the
// sparse hole. Zero weights time ggml's kernels honestly, but a
// mixture-of-experts router whose logits all tie sends every token to the
// same experts, so a batch reads far fewer expert weights than a real
// model's batch does.
type Weights string

// The weight modes of a written file.
const (
	// WeightsZero leaves every tensor a hole: the smallest file.
	WeightsZero Weights = "zero"
	// WeightsRouted fills what decides routing (the token embedding, the
	// norms and the routers) and leaves the rest a hole: each token then
	// picks its own experts while the file stays mostly sparse.
	WeightsRouted Weights = "routed"
	// WeightsRandom fills every tensor: a file as large on disk as the
	// model it is shaped like.
	WeightsRandom Weights = "random"
)

// ParseWeights accepts a mode name, ignoring case.
func ParseWeights(s string) (Weights, error) {
	for _, w := range []Weights{WeightsZero, WeightsRouted, WeightsRandom} {
		if strings.EqualFold(string(w), s) {
			return w, nil
		}
	}
	return "", fmt.Errorf("synth: unknown weights %q (have zero, routed, random)", s)
}

// Selects reports whether the mode fills the tensor named name.
func (w Weights) Selects(name string) bool {
	switch w {
	case WeightsRandom:
		return true
	case WeightsRouted:
		return RoutingTensor(name)
	}
	return false
}

// RoutingTensor reports whether a tensor takes part in choosing experts:
// the token embedding and the norms make each token's hidden state its
// own, and the routers (with their biases and DeepSeek V3's selection
// bias exp_probs_b) turn it into expert choices.
func RoutingTensor(name string) bool {
	return name == "token_embd.weight" || isNorm(name) ||
		strings.HasSuffix(name, "ffn_gate_inp.weight") ||
		strings.HasSuffix(name, "ffn_gate_inp.bias") ||
		strings.HasSuffix(name, "exp_probs_b.bias")
}

// isNorm matches norm weights (attn_norm, output_norm, attn_q_norm...),
// which multiply: they get values near 1 where other weights get values
// near 0.
func isNorm(name string) bool { return strings.HasSuffix(name, "norm.weight") }

// FillFile opens the GGUF file at path, whose header f describes, and
// fills the tensors keep selects (see Fill).
func FillFile(ctx context.Context, path string, f *gguf.File, keep func(name string) bool, seed uint64) (err error) {
	out, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	return Fill(ctx, out, f, keep, seed)
}

// fillChunk is how many bytes Fill generates before each write: large
// enough that the writes cost little, small enough to notice
// cancellation within a fraction of a second.
const fillChunk = 4 << 20

// Fill writes pseudo-random weights into the data regions of the tensors
// of f that keep selects, through w, an existing file that f is the
// header of. The values are ones ggml computes with as with real
// weights: float tensors hold N(0, 0.02) (norms 1 + N(0, 0.02)), and
// quantized blocks hold random quants under finite, normal scales chosen
// so the dequantized weights are about 0.02 in size. Bytes outside the
// selected tensors are not written, so a sparse file stays sparse there.
//
// Each tensor's values depend only on seed and the tensor's name, so two
// files filled with one seed agree on every tensor both fill. A selected
// tensor of a type Fill cannot encode is an error before anything is
// written.
func Fill(ctx context.Context, w io.WriterAt, f *gguf.File, keep func(name string) bool, seed uint64) error {
	var todo []gguf.TensorInfo
	for _, t := range f.Tensors {
		if !keep(t.Name) {
			continue
		}
		if _, ok := blockEncoders[t.Type]; !ok && !isFloat(t.Type) {
			return fmt.Errorf("synth: cannot fill tensor %s: type %s is not one synth encodes (it fills F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K and MXFP4)", t.Name, t.Type)
		}
		todo = append(todo, t)
	}
	g := newGaussians()
	buf := make([]byte, fillChunk)
	for _, t := range todo {
		info, _ := t.Type.Info()
		chunk := fillChunk / int(info.TypeSize) * int(info.TypeSize)
		rng := rand.NewPCG(seed, nameHash(t.Name))
		enc := encoderFor(t, g)
		for off := uint64(0); off < t.Size; off += uint64(chunk) {
			if err := ctx.Err(); err != nil {
				return err
			}
			n := min(uint64(chunk), t.Size-off)
			b := buf[:n]
			enc(b, rng)
			if _, err := w.WriteAt(b, f.DataOffset+int64(t.Offset+off)); err != nil {
				return fmt.Errorf("synth: filling %s: %w", t.Name, err)
			}
		}
	}
	return nil
}

// nameHash keys a tensor's stream by its name, so that what one tensor
// holds does not depend on which others are filled.
func nameHash(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

func isFloat(t gguf.GGMLType) bool {
	return t == gguf.TypeF32 || t == gguf.TypeF16 || t == gguf.TypeBF16
}

// encoderFor returns what fills a buffer of whole blocks of t.
func encoderFor(t gguf.TensorInfo, g *gaussians) func([]byte, *rand.PCG) {
	mean := float32(0)
	if isNorm(t.Name) {
		mean = 1
	}
	switch t.Type {
	case gguf.TypeF32:
		return func(b []byte, rng *rand.PCG) { g.f32(b, rng, mean) }
	case gguf.TypeF16:
		return g.table16(mean, f16bits).fill
	case gguf.TypeBF16:
		return g.table16(mean, bf16bits).fill
	}
	e := blockEncoders[t.Type]
	return func(b []byte, rng *rand.PCG) {
		randomBytes(b, rng)
		for off := 0; off < len(b); off += e.size {
			e.fix(b[off : off+e.size])
		}
	}
}

// randomBytes fills b (a multiple of 2 bytes long, as every block is)
// from rng, eight bytes a draw.
func randomBytes(b []byte, rng *rand.PCG) {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
	if i < len(b) {
		var tail [8]byte
		binary.LittleEndian.PutUint64(tail[:], rng.Uint64())
		copy(b[i:], tail[:])
	}
}

// weightSigma is the standard deviation of the float weights, about what
// trained transformer matrices hold.
const weightSigma = 0.02

// gaussians holds the 65536 quantiles of N(0, 1) at the midpoints of equal
// steps of probability: indexing it with 16 random bits draws a normal
// value with four draws from each 64-bit output, much faster than
// rand.NormFloat64 on the gigabytes a random F16 file takes.
type gaussians struct {
	z [1 << 16]float32
}

func newGaussians() *gaussians {
	g := new(gaussians)
	for i := range g.z {
		p := (float64(i)+0.5)/(1<<16)*2 - 1
		g.z[i] = float32(math.Sqrt2 * math.Erfinv(p))
	}
	return g
}

// f32 fills b with mean + N(0, weightSigma) as F32.
func (g *gaussians) f32(b []byte, rng *rand.PCG, mean float32) {
	for i := 0; i < len(b); i += 8 {
		r := rng.Uint64()
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(mean+weightSigma*g.z[uint16(r)]))
		if i+4 < len(b) {
			binary.LittleEndian.PutUint32(b[i+4:], math.Float32bits(mean+weightSigma*g.z[uint16(r>>16)]))
		}
	}
}

// table16 is the quantiles already encoded in a 16-bit float format.
type table16 [1 << 16]uint16

func (g *gaussians) table16(mean float32, enc func(float32) uint16) *table16 {
	t := new(table16)
	for i, z := range g.z {
		t[i] = enc(mean + weightSigma*z)
	}
	return t
}

func (t *table16) fill(b []byte, rng *rand.PCG) {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		r := rng.Uint64()
		binary.LittleEndian.PutUint16(b[i:], t[uint16(r)])
		binary.LittleEndian.PutUint16(b[i+2:], t[uint16(r>>16)])
		binary.LittleEndian.PutUint16(b[i+4:], t[uint16(r>>32)])
		binary.LittleEndian.PutUint16(b[i+6:], t[uint16(r>>48)])
	}
	for r := rng.Uint64(); i < len(b); i, r = i+2, r>>16 {
		binary.LittleEndian.PutUint16(b[i:], t[uint16(r)])
	}
}

// f16bits encodes f as IEEE half precision, rounding to nearest even.
// Values below the smallest normal half become signed zero rather than
// subnormals, which some kernels handle slowly, and values beyond the
// largest finite half become it.
func f16bits(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	if exp <= 0 {
		return sign
	}
	if exp >= 31 {
		return sign | 0x7bff
	}
	mant := b & 0x7fffff
	h := uint32(exp)<<10 | mant>>13
	if rem := mant & 0x1fff; rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // a carry out of the mantissa rightly raises the exponent
	}
	return sign | uint16(min(h, 0x7bff))
}

// bf16bits keeps the upper half of f's bits, rounding to nearest even.
// BF16 has F32's exponent range, so N(0, 0.02) never meets its limits.
func bf16bits(f float32) uint16 {
	b := math.Float32bits(f)
	return uint16((b + 0x7fff + (b >> 16 & 1)) >> 16)
}
