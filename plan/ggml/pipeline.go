package ggml

// This file holds the scheduler's pipeline parallelism: with n_copies > 1
// (Sched.Copies) ggml_backend_sched keeps several copies of every input,
// so that one micro-batch's inputs can be written while the previous one
// still computes on the next device.

// MaxCopies is GGML_SCHED_MAX_COPIES (ggml-backend.cpp): the copies of
// every input the scheduler keeps when it runs pipeline parallel.
const MaxCopies = 4

// pipelineLeafs is the leaf list of a split graph the scheduler runs with
// o.Copies > 1 (ggml_backend_sched_split_graph): every graph input gets
// Copies-1 duplicates beside itself, and every split input copy (a tensor
// copied to the backend of the split that reads it, splitInputs) copies in
// all; all of them are flagged input and output, so ggml-alloc places them
// before anything else and never frees them. They come first, as the
// scheduler adds them to the graph copy before the original leafs.
func (o *Sched) pipelineLeafs(leafs, nodes, splitInputs []*Tensor) []*Tensor {
	// Only inputs that a scheduled node reads are copied (a graph can
	// carry an input it does not use, inp_embd when tokens come in).
	// A node that reads an input on another backend reads the copy split
	// made instead; the copy's source is the input.
	read := map[*Tensor]bool{}
	visit := func(n *Tensor) {
		if n.plainView() {
			return
		}
		for _, s := range n.src {
			if s.input && !s.external {
				read[s] = true
			}
		}
	}
	for _, n := range nodes {
		visit(n)
	}
	for _, n := range splitInputs {
		visit(n)
	}
	out := make([]*Tensor, 0, len(leafs)+(len(read)+len(splitInputs))*o.Copies)
	pin := func(t *Tensor) {
		t.input, t.output = true, true
		out = append(out, t)
		for i := 1; i < o.Copies; i++ {
			c := o.Mem.tensor()
			c.Name, c.bytes, c.op, c.cls, c.dev, c.layout = t.Name, t.bytes, None, t.cls, t.dev, t.layout
			c.input, c.output = true, true
			out = append(out, c)
		}
	}
	for _, l := range leafs {
		if read[l] {
			pin(l)
		}
	}
	for _, c := range splitInputs {
		pin(c)
	}
	return append(out, leafs...)
}
