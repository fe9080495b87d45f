// Package ggml models what ggml does with a compute graph, as far as
// memory goes: its tensors and ops with ggml's shapes, types and views,
// ggml-alloc's graph allocator, the backend scheduler's splits and copies,
// and the Vulkan backend's reorder. A graph is recorded with the typed op
// constructors of Ctx, as llama.cpp records it with ggml's; the op of
// each node decides how the allocator and the scheduler treat it.
package ggml

// Op is a ggml op (enum ggml_op, with the unary ops folded into Unary and
// the gated ones into GLU, as ggml records them).
type Op uint8

// The ggml ops the graphs record. None is a leaf (a weight, an input, a
// cache) or a scheduler's copy of a tensor.
const (
	None Op = iota
	View
	Reshape
	Permute
	Transpose
	Cpy
	Cont
	GetRows
	SetRows
	MulMat
	MulMatID
	Add
	AddID
	Sub
	Mul
	Div
	Scale
	Sqr
	Sqrt
	Clamp
	SumRows
	Mean
	Repeat
	Concat
	Pad
	Argsort
	RMSNorm
	Norm
	L2Norm
	Rope
	SoftMax
	FlashAttnExt
	Unary
	GLU
	SSMConv
	SSMScan
	GatedDeltaNet
	Fill
	Im2Col
	Pool2D
)

// UnaryFunc is the function of a Unary op (enum ggml_unary_op), as far
// as a backend treats them apart; UnaryOther is any other.
type UnaryFunc uint8

// The unary functions the Vulkan backend fuses with a following MUL
// (ggml_vk_unary_mul_op_index).
const (
	UnaryOther UnaryFunc = iota
	UnaryGELU
	UnarySigmoid
	UnarySiLU
	UnarySoftplus
)

// empty is ggml's is_empty: an op that computes nothing.
func (o Op) empty() bool {
	return o == None || o.isView()
}

// isView is a view op: the result is the source's memory.
func (o Op) isView() bool {
	return o == View || o == Reshape || o == Permute || o == Transpose
}

// canInplace is ggml_op_can_inplace: the allocator may place the result
// in the memory of a source that dies with it.
func (o Op) canInplace() bool {
	switch o {
	case Scale, Add, AddID, Sub, Mul, Div, Sqr, Sqrt, Clamp, Unary, Rope, RMSNorm, SoftMax, Fill:
		return true
	}
	return false
}

// class is how the allocator treats a tensor.
type class uint8

const (
	leaf    class = iota // weights, inputs, caches: not placed by the graph
	view                 // views, and ops that write into their destination
	inplace              // ops that may reuse a dying source's memory
	other                // everything else
)
