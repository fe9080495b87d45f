package ggml

// This file is ggml_dyn_tallocr (ggml-alloc.c): the allocator that
// measures a compute buffer by placing every tensor of a graph and
// remembering the highest offset used. A buffer type with a largest buffer
// size is measured in chunks of at most that size, each a backend buffer
// of its own; the compute buffer llama.cpp prints is their sum.

// maxChunks is GGML_VBUFFER_MAX_CHUNKS: the last chunk a buffer may have
// is unbounded.
const maxChunks = 16

// unbounded stands for SIZE_MAX/2, the size of a block without limit.
const unbounded = 1 << 62

type block struct{ offset, size int64 }

// chunk is tallocr_chunk: a free list sorted by offset, and the highest
// offset the chunk has held.
type chunk struct {
	free    []block
	maxSize int64
}

// addr is buffer_address: a chunk and an offset in it.
type addr struct {
	chunk  int
	offset int64
}

// dynAlloc is ggml_dyn_tallocr.
type dynAlloc struct {
	align    int64
	maxChunk int64 // the buffer type's largest buffer; unbounded for 0
	chunks   []*chunk
}

func newDynAlloc(align, maxChunk int64) *dynAlloc {
	if maxChunk <= 0 || maxChunk > unbounded {
		maxChunk = unbounded
	}
	return &dynAlloc{align: align, maxChunk: maxChunk}
}

// size is the buffer the allocation needs: every chunk's highest offset.
func (a *dynAlloc) size() int64 {
	var n int64
	for _, c := range a.chunks {
		n += c.maxSize
	}
	return n
}

func (a *dynAlloc) newChunk(min int64) int {
	if len(a.chunks) >= maxChunks {
		return -1
	}
	// A chunk holds at most maxChunk bytes unless one tensor needs more,
	// and the last one allowed has no limit.
	c := &chunk{free: []block{{0, max(min, a.maxChunk)}}}
	if len(a.chunks) == maxChunks-1 {
		c.free[0].size = unbounded
	}
	a.chunks = append(a.chunks, c)
	return len(a.chunks) - 1
}

func (a *dynAlloc) alloc(size int64) addr {
	size = alignUp(size, a.align)
	bestChunk, bestBlock := -1, -1
	// The best fitting block that is not the last of its chunk. As in
	// ggml, the size to beat starts afresh in each chunk.
	for ci, c := range a.chunks {
		bestSize := int64(1<<63 - 1)
		for i := 0; i < len(c.free)-1; i++ {
			if b := c.free[i]; b.size >= size && b.size <= bestSize {
				bestChunk, bestBlock, bestSize = ci, i, b.size
			}
		}
	}
	if bestBlock == -1 {
		// A chunk's last block, which may grow the chunk: the one that
		// grows it least or, if none need grow, leaves the least unused.
		bestReuse := int64(-1 << 63)
		for ci, c := range a.chunks {
			if len(c.free) == 0 {
				continue
			}
			b := c.free[len(c.free)-1]
			reuse := c.maxSize - b.offset - size
			betterReuse := bestReuse < 0 && reuse > bestReuse
			betterFit := reuse >= 0 && reuse < bestReuse
			if b.size >= size && (betterReuse || betterFit) {
				bestChunk, bestBlock, bestReuse = ci, len(c.free)-1, reuse
			}
		}
	}
	if bestBlock == -1 {
		bestChunk, bestBlock = a.newChunk(size), 0
		if bestChunk == -1 {
			panic("ggml: graph allocation ran out of chunks") // the last chunk is unbounded
		}
	}
	c := a.chunks[bestChunk]
	b := &c.free[bestBlock]
	at := addr{bestChunk, b.offset}
	b.offset += size
	b.size -= size
	if b.size == 0 {
		c.free = append(c.free[:bestBlock], c.free[bestBlock+1:]...)
	}
	c.maxSize = max(c.maxSize, at.offset+size)
	return at
}

// shrink frees the tail of a block of old bytes that now holds only n.
func (a *dynAlloc) shrink(at addr, old, n int64) {
	old, n = alignUp(old, a.align), alignUp(n, a.align)
	if old > n {
		a.release(addr{at.chunk, at.offset + n}, old-n)
	}
}

func (a *dynAlloc) release(at addr, size int64) {
	size = alignUp(size, a.align)
	c := a.chunks[at.chunk]
	offset := at.offset
	for i := range c.free {
		b := &c.free[i]
		if b.offset+b.size == offset {
			b.size += size
			if i+1 < len(c.free) && b.offset+b.size == c.free[i+1].offset {
				b.size += c.free[i+1].size
				c.free = append(c.free[:i+1], c.free[i+2:]...)
			}
			return
		}
		if offset+size == b.offset {
			b.offset = offset
			b.size += size
			if i > 0 && c.free[i-1].offset+c.free[i-1].size == b.offset {
				c.free[i-1].size += b.size
				c.free = append(c.free[:i], c.free[i+1:]...)
			}
			return
		}
	}
	pos := 0
	for pos < len(c.free) && c.free[pos].offset < offset {
		pos++
	}
	c.free = append(c.free, block{})
	copy(c.free[pos+1:], c.free[pos:])
	c.free[pos] = block{offset, size}
}

func alignUp(x, a int64) int64 { return (x + a - 1) / a * a }
