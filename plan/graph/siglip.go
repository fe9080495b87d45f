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
	return ProjectorGraphOn(p, flash, "CPU")
}

// ProjectorGraphOn is ProjectorGraph with the projector's weights on
// device home, for a scheduler to split between it and the CPU, which
// holds the graph's inputs.
func ProjectorGraphOn(p *arch.Projector, flash bool, home string) (g *ggml.Graph, ok bool) {
	if p == nil || p.Vision == nil {
		return nil, false
	}
	b := &clipGB{tensors: make(map[string]gguf.Tensor, len(p.Tensors)), home: home}
	for _, t := range p.Tensors {
		b.tensors[t.Name] = t
	}
	v := *p.Vision
	switch {
	case p.Type == arch.ProjectorGemma3 && b.gemma3Ready(v):
		b.Expand(b.gemma3(v, flash))
	case p.Type == arch.ProjectorPixtral && b.pixtralReady(v):
		b.Expand(b.pixtral(v, flash))
	case (p.Type == arch.ProjectorQwen2VL || p.Type == arch.ProjectorQwen25VL) && b.qwenReady(v, p.Type == arch.ProjectorQwen25VL):
		b.Expand(b.qwenVL(v, p.Type == arch.ProjectorQwen25VL, flash))
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
	// home is the device the projector's weights are on.
	home string
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
	w := b.External(name, t.Type, b.home, ne...).SetWeight(int64(t.Size))
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
	if _, ok := b.tensors["mm.soft_emb_norm.weight"]; !ok {
		return false
	}
	return b.vitTensorsReady(v, "mm.input_projection.weight")
}

// vitTensorsReady checks the patch kernel (a square of the patch size
// into Embd channels) and, as matrices, every block's Q, K, V, output
// and feed-forward weights and the extra tensors named.
func (b *clipGB) vitTensorsReady(v arch.VisionEncoder, extra ...string) bool {
	kernel, ok := b.tensors["v.patch_embd.weight"]
	if !ok || len(kernel.Shape) != 4 || kernel.Shape[0] != uint64(v.PatchSize) || kernel.Shape[1] != uint64(v.PatchSize) ||
		kernel.Shape[3] != uint64(v.Embd) {
		return false
	}
	need := extra
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
		x = b.norm(x, "v.pre_ln", false)
	}
	for il := range v.Blocks {
		x = b.vitBlock(x, v, il, vitOpts{flash: flash, act: ggml.UnaryGELU})
	}
	if b.weight("v.post_ln.weight") != nil {
		x = b.norm(x, "v.post_ln", false)
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
	x := b.conv2d(b.weight("v.patch_embd.weight"), raw, patch)
	side := size / patch
	x = b.Reshape(x, side*side, int64(v.Embd), 1)
	x = b.Cont(b.Transpose(x))
	return b.add(x, "v.patch_embd.bias")
}

// vitOpts is how one encoder's layers differ within build_vit.
type vitOpts struct {
	rms   bool                  // RMS norms, layer norms otherwise
	rope  func(*tensor) *tensor // applied to Q and K; nil for none
	mask  *tensor               // the attention mask, nil for none
	flash bool
	// act is the activation of a feed-forward without a gate; one with
	// a gate is gated by it (GLU of the gate by the up).
	act ggml.UnaryFunc
}

// vitBlock is one layer of build_vit for an encoder with separate Q, K
// and V: norm, the attention (with RoPE and a mask where o has them),
// the residual, norm, the feed-forward and the residual.
func (b *clipGB) vitBlock(inpL *tensor, v arch.VisionEncoder, il int, o vitOpts) *tensor {
	p := "v.blk." + strconv.Itoa(il) + "."
	n := inpL.Ne()[1]
	heads := int64(v.Heads)
	head := int64(v.Embd) / heads
	cur := b.norm(inpL, p+"ln1", o.rms)
	q := b.Reshape(b.linear(cur, p+"attn_q"), head, heads, n, 1)
	k := b.Reshape(b.linear(cur, p+"attn_k"), head, heads, n, 1)
	vv := b.Reshape(b.linear(cur, p+"attn_v"), head, heads, n, 1)
	if o.rope != nil {
		q, k = o.rope(q), o.rope(k)
	}
	cur = b.attn(q, k, vv, o.mask, o.flash)
	cur = b.linear(cur, p+"attn_out")
	cur = b.Add(cur, inpL)
	inpL = cur
	cur = b.norm(cur, p+"ln2", o.rms)
	up := b.linear(cur, p+"ffn_up")
	if b.weight(p+"ffn_gate.weight") != nil {
		cur = b.GLU(b.linear(cur, p+"ffn_gate"), up)
	} else {
		cur = b.UnaryOf(o.act, up)
	}
	cur = b.linear(cur, p+"ffn_down")
	return b.Add(inpL, cur)
}

// conv2d is ggml_conv_2d(kernel, img, s, s, 0, 0, 1, 1): im2col (F16, or
// F32 for a BF16 kernel), the product with the flattened kernel, and a
// contiguous copy in {OW, OH, OC, N}.
func (b *clipGB) conv2d(kernel, img *tensor, s int64) *tensor {
	colType := gguf.TypeF16
	if kernel.Type() == gguf.TypeBF16 {
		colType = gguf.TypeF32
	}
	col := b.Im2Col(kernel, img, s, s, colType)
	c, k := col.Ne(), kernel.Ne()
	x := b.MulMat(b.Reshape(col, c[0], c[3]*c[2]*c[1]), b.Reshape(kernel, k[0]*k[1]*k[2], k[3]))
	x = b.Reshape(x, c[1], c[2], c[3], k[3])
	return b.Cont(b.Permute(x, 0, 1, 3, 2))
}

// norm is build_norm: an RMS norm (NORM_TYPE_RMS) or a layer norm
// (NORM_TYPE_NORMAL), then the weight and the bias where the file has
// them.
func (b *clipGB) norm(x *tensor, prefix string, rms bool) *tensor {
	if rms {
		return b.add(b.mul(b.RMSNorm(x), prefix+".weight"), prefix+".bias")
	}
	return b.add(b.mul(b.Norm(x), prefix+".weight"), prefix+".bias")
}

// attn is clip's build_attn with an optional mask. clip records Q,
// K and V first, in that order (ggml_build_forward_order), so that the
// product of K and Q does not record K's branch before Q's. With flash
// attention K, V and the mask are cast to F16 copies; without, V is
// transposed into a copy and the scores of every head are materialized,
// n×n each, the mask added by the softmax.
func (b *clipGB) attn(q, k, v, mask *tensor, flash bool) *tensor {
	b.Expand(q)
	b.Expand(k)
	b.Expand(v)
	qp := b.Permute(q, 0, 2, 1, 3)
	kp := b.Permute(k, 0, 2, 1, 3)
	if flash {
		vp := b.Permute(v, 0, 2, 1, 3)
		kp = b.Cast(kp, gguf.TypeF16)
		vp = b.Cast(vp, gguf.TypeF16)
		if mask != nil {
			mask = b.Cast(mask, gguf.TypeF16)
		}
		out := b.FlashAttnExt(qp, kp, vp, mask, nil)
		ne := out.Ne()
		return b.Reshape(out, ne[0]*ne[1], ne[2]*ne[3])
	}
	vt := b.Cont(b.Permute(v, 1, 2, 0, 3))
	kq := b.SoftMax(b.MulMat(kp, qp), mask, nil)
	kqv := b.Permute(b.MulMat(vt, kq), 0, 2, 1, 3)
	ne := kqv.Ne()
	return b.Cont(kqv, ne[0]*ne[1], ne[2]*ne[3])
}
