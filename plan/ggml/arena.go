package ggml

// Arena holds the tensors and source lists of graph descriptions, handed
// out in chunks. A graph holds thousands of tensors and a search replays
// several graphs; allocating each tensor on its own, and leaving each
// graph to the collector, cost more than the replays themselves. An arena
// that one replay has finished with is reset and serves the next.
type Arena struct {
	tensors [][]Tensor
	ti, tj  int // next tensor: chunk ti, index tj
	srcs    [][]*Tensor
	si, sj  int // next source list: chunk si, from index sj
	// nodes, leafs and split keep the room of the last graph's node and
	// leaf lists and of its split graph's node list for the next.
	nodes, leafs, split []*Tensor
	// metal keeps the room of the Metal reorder's packed nodes and of
	// their memory ranges for the next reorder.
	metal      []metalNode
	metalRange []*Tensor
	metalOut   []*Tensor
	metalOrder []int
	metalUsed  []bool
}

const (
	tensorChunk = 512
	srcChunk    = 2048
)

// tensor returns a zeroed tensor.
func (a *Arena) tensor() *Tensor {
	if a.ti == len(a.tensors) {
		a.tensors = append(a.tensors, make([]Tensor, tensorChunk))
	}
	x := &a.tensors[a.ti][a.tj]
	if a.tj++; a.tj == tensorChunk {
		a.ti, a.tj = a.ti+1, 0
	}
	return x
}

// list returns a zeroed source list of n entries whose capacity is n, so
// that appending to it never writes into another tensor's list.
func (a *Arena) list(n int) []*Tensor {
	if n > srcChunk {
		return make([]*Tensor, n)
	}
	if a.si < len(a.srcs) && a.sj+n > srcChunk {
		a.si, a.sj = a.si+1, 0
	}
	if a.si == len(a.srcs) {
		a.srcs = append(a.srcs, make([]*Tensor, srcChunk))
	}
	out := a.srcs[a.si][a.sj : a.sj+n : a.sj+n]
	a.sj += n
	return out
}

// Reset zeroes what was handed out, to be handed out again. Nothing from
// before may be used after it.
func (a *Arena) Reset() {
	for i := 0; i <= a.ti && i < len(a.tensors); i++ {
		end := tensorChunk
		if i == a.ti {
			end = a.tj
		}
		clear(a.tensors[i][:end])
	}
	for i := 0; i <= a.si && i < len(a.srcs); i++ {
		end := srcChunk
		if i == a.si {
			end = a.sj
		}
		clear(a.srcs[i][:end])
	}
	a.ti, a.tj, a.si, a.sj = 0, 0, 0, 0
}
