package catalog

import (
	"fmt"

	"github.com/headroom-llm/headroom/synth"
)

// ShapeSpec is an entry's architecture in synth's terms. Base names one of
// synth's built-in shapes (each cites its config.json); the other fields,
// when set, replace the base's values, so a sibling of a built-in shape
// (Gemma 3 12B beside Gemma 3 4B) states only what differs. Without a base
// every required field must be given.
type ShapeSpec struct {
	Base    string  `json:"base,omitempty"`
	Arch    *string `json:"arch,omitempty"`
	Layers  *int    `json:"layers,omitempty"`
	Embd    *int    `json:"embd,omitempty"`
	Heads   *int    `json:"heads,omitempty"`
	HeadsKV *int    `json:"heads_kv,omitempty"`
	HeadDim *int    `json:"head_dim,omitempty"`
	// RopeDim is the rotated part of a head (rope.dimension_count), where
	// the base rotates part of it (GPT-NeoX).
	RopeDim    *int     `json:"rope_dim,omitempty"`
	FF         *int     `json:"ff,omitempty"`
	Vocab      *int     `json:"vocab,omitempty"`
	CtxTrain   *int     `json:"ctx_train,omitempty"`
	RopeTheta  *float32 `json:"rope_theta,omitempty"`
	NormEps    *float32 `json:"norm_eps,omitempty"`
	TiedOutput *bool    `json:"tied_output,omitempty"`
	QKNorm     *bool    `json:"qk_norm,omitempty"`
	QKVBias    *bool    `json:"qkv_bias,omitempty"`
	Fused      *bool    `json:"fused,omitempty"`
	Tokenizer  *string  `json:"tokenizer,omitempty"`
	// TokenizerPre is tokenizer.ggml.pre.
	TokenizerPre *string `json:"tokenizer_pre,omitempty"`
	// NoSWA removes the base's sliding window.
	NoSWA bool       `json:"no_swa,omitempty"`
	SWA   *synth.SWA `json:"swa,omitempty"`
	MoE   *MoESpec   `json:"moe,omitempty"`
	SSM   *SSMSpec   `json:"ssm,omitempty"`
	// Rope replaces the base's rope scaling; NoRope removes it.
	Rope   *synth.Rope `json:"rope,omitempty"`
	NoRope bool        `json:"no_rope,omitempty"`
	// MTP is the multi-token-prediction blocks current conversions of
	// Qwen3.5 and 3.6 carry after the layers (synth.SSM.MTP): in the
	// download, never loaded.
	MTP int `json:"mtp,omitempty"`
}

// MoESpec is the expert layout; fields left zero keep the base's.
type MoESpec struct {
	Experts int `json:"experts,omitempty"`
	Used    int `json:"used,omitempty"`
	FF      int `json:"ff,omitempty"`
}

// SSMSpec is a Mamba-2 layout.
type SSMSpec struct {
	ConvKernel int `json:"conv_kernel"`
	Inner      int `json:"inner"`
	State      int `json:"state"`
	Groups     int `json:"groups"`
	Heads      int `json:"heads"`
}

// Resolve returns the synth shape the spec describes.
func (p ShapeSpec) Resolve() (synth.Shape, error) {
	var s synth.Shape
	if p.Base != "" {
		b, ok := synth.Lookup(p.Base)
		if !ok {
			return s, fmt.Errorf("shape base %q is not one of synth's shapes", p.Base)
		}
		s = b
		// Copy the parts held by pointer so an override cannot change
		// synth's table.
		if s.MoE != nil {
			m := *s.MoE
			s.MoE = &m
		}
	} else if p.Arch == nil || p.Layers == nil || p.Embd == nil || p.Vocab == nil || p.CtxTrain == nil || p.Tokenizer == nil {
		return s, fmt.Errorf("a shape without a base needs arch, layers, embd, vocab, ctx_train and tokenizer")
	}
	setS := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	setI := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	setF := func(dst *float32, v *float32) {
		if v != nil {
			*dst = *v
		}
	}
	setB := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	setS(&s.Arch, p.Arch)
	setI(&s.Layers, p.Layers)
	setI(&s.Embd, p.Embd)
	setI(&s.Heads, p.Heads)
	setI(&s.HeadsKV, p.HeadsKV)
	setI(&s.HeadDim, p.HeadDim)
	setI(&s.RopeDim, p.RopeDim)
	setI(&s.FF, p.FF)
	setI(&s.Vocab, p.Vocab)
	setI(&s.CtxTrain, p.CtxTrain)
	setF(&s.RopeTheta, p.RopeTheta)
	setF(&s.NormEps, p.NormEps)
	setB(&s.TiedOutput, p.TiedOutput)
	setB(&s.QKNorm, p.QKNorm)
	setB(&s.QKVBias, p.QKVBias)
	setB(&s.Fused, p.Fused)
	setS(&s.Tokenizer, p.Tokenizer)
	setS(&s.TokenizerPre, p.TokenizerPre)
	if p.NoSWA {
		s.SWA = nil
	}
	if p.SWA != nil {
		w := *p.SWA
		s.SWA = &w
	}
	if p.NoRope {
		s.Rope = nil
	}
	if p.Rope != nil {
		r := *p.Rope
		s.Rope = &r
	}
	if m := p.MoE; m != nil {
		if s.MoE == nil {
			s.MoE = &synth.MoE{}
		}
		if m.Experts != 0 {
			s.MoE.Experts = m.Experts
		}
		if m.Used != 0 {
			s.MoE.Used = m.Used
		}
		if m.FF != 0 {
			s.MoE.FF = m.FF
		}
	}
	if m := p.SSM; m != nil {
		s.SSM = &synth.SSM{ConvKernel: m.ConvKernel, Inner: m.Inner, State: m.State, Groups: m.Groups, Heads: m.Heads}
	}
	if p.MTP != 0 {
		if s.SSM == nil || s.SSM.AttnInterval == 0 {
			return s, fmt.Errorf("mtp %d: only a gated-DeltaNet shape (qwen35, qwen35moe) has MTP blocks", p.MTP)
		}
		m := *s.SSM
		m.MTP = p.MTP
		s.SSM = &m
	}
	if s.Layers <= 0 || s.Embd <= 0 || s.Vocab <= 0 || s.CtxTrain <= 0 {
		return s, fmt.Errorf("shape has a zero dimension")
	}
	return s, nil
}
