package graph

import (
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/ggml"
)

// pixtralMerge is the merge side clip uses for "pixtral": the file's
// clip.vision.spatial_merge_size, else 1 (Pixtral 12B merges nothing).
func pixtralMerge(v arch.VisionEncoder) int64 {
	if v.SpatialMerge > 0 {
		return int64(v.SpatialMerge)
	}
	return 1
}

// pixtralReady checks the tensors clip_graph_pixtral reads, so that an
// unexpected header falls back to the estimate.
func (b *clipGB) pixtralReady(v arch.VisionEncoder) bool {
	merge := pixtralMerge(v)
	if side := int64(v.Warmup() / v.PatchSize); side <= 0 || side%merge != 0 {
		return false
	}
	if v.Heads <= 0 || v.Embd%v.Heads != 0 || (v.Embd/v.Heads)%4 != 0 || v.Blocks <= 0 || v.Blocks > 1<<10 || merge > 8 {
		return false
	}
	need := []string{"mm.1.weight", "mm.2.weight"}
	if merge > 1 {
		if w, ok := b.tensors["mm.patch_merger.weight"]; !ok || len(w.Shape) != 2 || w.Shape[0] != uint64(int64(v.Embd)*merge*merge) {
			return false
		}
		need = append(need, "mm.patch_merger.weight")
	}
	return b.vitTensorsReady(v, need...)
}

// pixtral is clip_graph_pixtral: the patch embedding, a ViT with RMS
// norms and 2D RoPE on Q and K, Mistral 3's patch merger (an RMS norm,
// the merge x merge squares unfolded by im2col, a product), the
// two-layer GELU projection and an [IMG_BREAK] token after each row.
func (b *clipGB) pixtral(v arch.VisionEncoder, flash bool) *tensor {
	// clip warms Pixtral up at 16x16 tokens whatever the file or
	// --image-max-tokens say (arch.VisionEncoder.Warmup).
	merge := pixtralMerge(v)
	side := int64(v.Warmup() / v.PatchSize)
	n, embd := side*side, int64(v.Embd)
	posH := b.Input("pos_h", gguf.TypeI32, n)
	posW := b.Input("pos_w", gguf.TypeI32, n)
	x := b.Reshape(b.patchEmbed(v, side*int64(v.PatchSize)), embd, n)
	x = b.norm(x, "v.pre_ln", true)
	// build_rope_2d: the first half of each head rotated by the row,
	// the second by the column, as two RoPE ops.
	rope := func(t *tensor) *tensor { return b.Rope(b.Rope(t, posH, nil), posW, nil) }
	for il := range v.Blocks {
		x = b.vitBlock(x, v, il, vitOpts{rms: true, rope: rope, flash: flash, act: ggml.UnarySiLU})
	}
	x = b.Reshape(x, embd, n, 1)
	if merge > 1 {
		x = b.norm(x, "mm.input_norm", true)
		x = b.Cont(b.Permute(b.Reshape(x, embd, side, side), 2, 0, 1, 3))
		kernel := b.View(x, merge, merge, embd)
		x = b.Im2Col(kernel, x, merge, merge, gguf.TypeF32)
		c := x.Ne()
		x = b.MulMat(b.weight("mm.patch_merger.weight"), b.Reshape(x, c[0], c[1]*c[2]))
	}
	x = b.linear(x, "mm.1")
	x = b.UnaryOf(ggml.UnaryGELU, x)
	x = b.linear(x, "mm.2")
	if b.weight("v.token_embd.img_break") == nil {
		return x
	}
	rows := side / merge
	text := x.Ne()[0]
	grid := b.Reshape(x, text, rows, rows)
	tok := b.Add(b.Scale(b.Input("img_break_rows", gguf.TypeF32, text, 1, rows)), b.weight("v.token_embd.img_break"))
	return b.View(b.Concat(grid, tok, 1), text, rows*rows+rows-1)
}
