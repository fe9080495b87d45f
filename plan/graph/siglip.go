package graph

import (
	"strconv"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// This file replays the multimodal projectors' encoder graphs as libmtmd
// builds them (tools/mtmd/clip.cpp and tools/mtmd/models/*.cpp) for the
// warm-up image clip reserves its compute buffer with: a blank image of
// clip.vision.image_size on each side.

// gemma3Merge is the side of the patch squares Gemma 3's projector
// averages into one token where the file does not say
// (clip.vision.projector.scale_factor): 64 patches a side become 16.
const gemma3Merge = 4

// ProjectorGraph records the encoder graph clip reserves for projector p
// at its warm-up image, with flash attention or without, on the CPU.
// ok is false for a projector type it does not replay (so far "gemma3",
// clip_graph_siglip's Gemma 3 branch, "pixtral", Pixtral's and Mistral
// 3's, and Qwen's "qwen2vl_merger" and "qwen2.5vl_merger",
// clip_graph_qwen2vl), or for a header whose tensors do not make that
// graph.
func ProjectorGraph(p *arch.Projector, flash bool) (g *ggml.Graph, ok bool) {
	if p == nil || p.Vision == nil {
		return nil, false
	}
	b := &clipGB{tensors: make(map[string]gguf.Tensor, len(p.Tensors))}
	for _, t := range p.Tensors {
		b.tensors[t.Name] = t
	}
	v := *p.Vision
	switch {
	case p.Type == "gemma3" && b.gemma3Ready(v):
		b.Expand(b.gemma3(v, flash))
	case p.Type == "pixtral" && b.pixtralReady(v):
		b.Expand(b.pixtral(v, flash))
	case (p.Type == qwen2VL || p.Type == qwen25VL) && b.qwenReady(v, p.Type == qwen25VL):
		b.Expand(b.qwenVL(v, p.Type == qwen25VL, flash))
	default:
		return nil, false
	}
	return &b.G, true
}

// clipGB records one encoder graph over the projector's tensors.
type clipGB struct {
	ggml.Ctx
	tensors map[string]gguf.Tensor
	weights map[string]*tensor
}

// weight is the projector's tensor of that name in its own type and
// shape (the type decides some results' types: clip's patch
// convolution and its transposed projection), or nil when the file has
// none (a bias some encoders leave out).
func (b *clipGB) weight(name string) *tensor {
	if w := b.weights[name]; w != nil {
		return w
	}
	t, ok := b.tensors[name]
	if !ok {
		return nil
	}
	ne := make([]int64, len(t.Shape))
	for i, d := range t.Shape {
		ne[i] = int64(d)
	}
	if b.weights == nil {
		b.weights = map[string]*tensor{}
	}
	w := b.External(name, t.Type, "CPU", ne...).SetWeight(int64(t.Size))
	b.weights[name] = w
	return w
}

// add is x plus the weight of that name, x alone when the file has none.
func (b *clipGB) add(x *tensor, name string) *tensor {
	if w := b.weight(name); w != nil {
		return b.Add(x, w)
	}
	return x
}

// mul is x times the weight of that name, x alone when the file has none.
func (b *clipGB) mul(x *tensor, name string) *tensor {
	if w := b.weight(name); w != nil {
		return b.Mul(x, w)
	}
	return x
}

// layerNorm is clip's build_norm with NORM_TYPE_NORMAL: ggml_norm, then
// the weight and the bias where the file has them.
func (b *clipGB) layerNorm(x *tensor, prefix string) *tensor {
	return b.add(b.mul(b.Norm(x), prefix+".weight"), prefix+".bias")
}

// linear is build_mm with the layer's weight, and its bias if any.
func (b *clipGB) linear(x *tensor, prefix string) *tensor {
	return b.add(b.MulMat(b.weight(prefix+".weight"), x), prefix+".bias")
}

// gemma3Ready checks that the tensors the Gemma 3 graph reads are there
// with the shapes it needs, so that a hostile or unexpected header falls
// back to the estimate instead of a graph ggml would refuse.
func (b *clipGB) gemma3Ready(v arch.VisionEncoder) bool {
	merge := v.Merge
	if merge == 0 {
		merge = gemma3Merge
	}
	side := v.ImageSize / v.PatchSize
	if v.Heads <= 0 || v.Embd%v.Heads != 0 || side%merge != 0 || v.Blocks <= 0 || v.Blocks > 1<<10 {
		return false
	}
	kernel, ok := b.tensors["v.patch_embd.weight"]
	if !ok || len(kernel.Shape) != 4 || kernel.Shape[0] != uint64(v.PatchSize) || kernel.Shape[1] != uint64(v.PatchSize) ||
		kernel.Shape[3] != uint64(v.Embd) {
		return false
	}
	if _, ok := b.tensors["mm.soft_emb_norm.weight"]; !ok {
		return false
	}
	need := []string{"mm.input_projection.weight"}
	for il := range v.Blocks {
		p := "v.blk." + strconv.Itoa(il) + "."
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_out", "ffn_up", "ffn_down"} {
			need = append(need, p+n+".weight")
		}
	}
	for _, n := range need {
		if t, ok := b.tensors[n]; !ok || len(t.Shape) != 2 {
			return false
		}
	}
	return true
}

// gemma3 is clip_graph_siglip for PROJECTOR_TYPE_GEMMA3: the patch
// embedding (a convolution as im2col and a product), the ViT, then the
// patches averaged merge by merge, RMS-normed and projected to the text
// model's width.
func (b *clipGB) gemma3(v arch.VisionEncoder, flash bool) *tensor {
	side := int64(v.ImageSize / v.PatchSize)
	n, embd := side*side, int64(v.Embd)
	x := b.patchEmbed(v, int64(v.ImageSize))
	x = b.add(x, "v.position_embd.weight")
	x = b.Reshape(x, embd, n)
	if b.weight("v.pre_ln.weight") != nil {
		x = b.layerNorm(x, "v.pre_ln")
	}
	for il := range v.Blocks {
		x = b.vitLayer(x, v, il, flash)
	}
	if b.weight("v.post_ln.weight") != nil {
		x = b.layerNorm(x, "v.post_ln")
	}
	x = b.Reshape(x, embd, n, 1)

	merge := int64(v.Merge)
	if merge == 0 {
		merge = gemma3Merge
	}
	x = b.Cont(b.Transpose(x), side, side, embd, 1)
	x = b.Pool2D(x, merge, merge, merge, merge)
	out := x.Ne()[0]
	x = b.Reshape(x, out*out, embd, 1)
	x = b.Cont(b.Transpose(x))
	x = b.mul(b.RMSNorm(x), "mm.soft_emb_norm.weight")
	// The projection is stored text width first; clip transposes a
	// copy of it in the compute buffer for every image.
	proj := b.Cont(b.Transpose(b.weight("mm.input_projection.weight")))
	return b.MulMat(proj, x)
}

// patchEmbed is build_inp: ggml_conv_2d of a size x size image by the
// patch kernel (im2col in F16, F32 for a BF16 kernel, then a product),
// laid out one row per patch, plus the patch bias.
func (b *clipGB) patchEmbed(v arch.VisionEncoder, size int64) *tensor {
	patch := int64(v.PatchSize)
	raw := b.Input("inp_raw", gguf.TypeF32, size, size, 3, 1)
	kernel := b.weight("v.patch_embd.weight")
	colType := gguf.TypeF16
	if kernel.Type() == gguf.TypeBF16 {
		colType = gguf.TypeF32
	}
	col := b.Im2Col(kernel, raw, patch, patch, colType)
	c, k := col.Ne(), kernel.Ne()
	x := b.MulMat(b.Reshape(col, c[0], c[3]*c[2]*c[1]), b.Reshape(kernel, k[0]*k[1]*k[2], k[3]))
	x = b.Reshape(x, c[1], c[2], c[3], k[3])
	x = b.Cont(b.Permute(x, 0, 1, 3, 2))
	side := size / patch
	x = b.Reshape(x, side*side, int64(v.Embd), 1)
	x = b.Cont(b.Transpose(x))
	return b.add(x, "v.patch_embd.bias")
}

// vitLayer is one layer of build_vit for an encoder with separate Q, K
// and V, layer norms and a plain GELU feed-forward (SigLIP).
func (b *clipGB) vitLayer(inpL *tensor, v arch.VisionEncoder, il int, flash bool) *tensor {
	p := "v.blk." + strconv.Itoa(il) + "."
	n := inpL.Ne()[1]
	heads := int64(v.Heads)
	head := int64(v.Embd) / heads
	cur := b.layerNorm(inpL, p+"ln1")
	q := b.Reshape(b.linear(cur, p+"attn_q"), head, heads, n, 1)
	k := b.Reshape(b.linear(cur, p+"attn_k"), head, heads, n, 1)
	vv := b.Reshape(b.linear(cur, p+"attn_v"), head, heads, n, 1)
	cur = b.attn(q, k, vv, flash)
	cur = b.linear(cur, p+"attn_out")
	cur = b.Add(cur, inpL)
	inpL = cur
	cur = b.layerNorm(cur, p+"ln2")
	cur = b.linear(cur, p+"ffn_up")
	cur = b.UnaryOf(ggml.UnaryGELU, cur)
	cur = b.linear(cur, p+"ffn_down")
	return b.Add(inpL, cur)
}

// attn is clip's build_attn without a mask (attnMask).
func (b *clipGB) attn(q, k, v *tensor, flash bool) *tensor {
	return b.attnMask(q, k, v, nil, flash)
}
