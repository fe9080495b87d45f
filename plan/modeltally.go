package plan

import (
	"fmt"
	"slices"

	"github.com/headroom-llm/headroom/arch"
)

// modelTally adds up the model buffers as the loader fills them. The
// buffers are kept in the order they are first used; a handful, so a list
// is quicker than a map for the hundreds of tensors that add to them.
type modelTally struct {
	sums []modelSum
	// spans are the buffers mapped from the file: one per buffer type and
	// file (shard), spanning [first, last) of its tensors' bytes in that
	// file (llama_model_loader::get_mapping_range), whatever lies between.
	spans []mappedSpan
}

type modelSum struct {
	k bufKey
	n int64
}

type mappedSpan struct {
	dev, buft   string
	shard       int
	first, last int64
	used        int64 // the bytes of the tensors in the span
}

func (tl *modelTally) add(k bufKey, n int64) {
	for i := range tl.sums {
		if tl.sums[i].k == k {
			tl.sums[i].n += n
			return
		}
	}
	tl.sums = append(tl.sums, modelSum{k, n})
}

func (tl *modelTally) mapped(t arch.Tensor, dev, buft string) {
	for i := range tl.spans {
		if s := &tl.spans[i]; s.dev == dev && s.buft == buft && s.shard == t.Shard {
			s.first = min(s.first, t.FileOffset)
			s.last = max(s.last, t.FileOffset+int64(t.Size))
			s.used += int64(t.Size)
			return
		}
	}
	tl.spans = append(tl.spans, mappedSpan{dev, buft, t.Shard, t.FileOffset, t.FileOffset + int64(t.Size), int64(t.Size)})
}

// buffers lists the tally: the CPU's mapped spans first, file by file, as
// llama.cpp creates them, then the other mapped spans, then the loaded
// buffers (a GPU's pinned host buffer with its pad).
//
// Under mlock, llama.cpp locks the CPU's mapping from the file's start to
// the end of each weight it uses in place (llama_mlock::grow_to(offs +
// size) in load_all_data), so every page up to the span's end stays
// resident, the repacked weights' pages between included.
func (tl *modelTally) buffers(cpu string, host *Device, metalMappedSpan, mlock bool) []Buffer {
	spans := slices.Clone(tl.spans)
	slices.SortStableFunc(spans, func(a, b mappedSpan) int {
		if (a.dev == cpu) != (b.dev == cpu) {
			if a.dev == cpu {
				return -1
			}
			return 1
		}
		return a.shard - b.shard
	})
	var out []Buffer
	for _, s := range spans {
		b := Buffer{Device: s.dev, BufferType: s.buft, Kind: KindModel, Bytes: s.last - s.first}
		if s.buft != mappedCPU && !metalMappedSpan {
			// The file is mapped from its start, so the span's start
			// lies first bytes past a page boundary.
			b.Bytes += s.first % MetalPage
		}
		switch {
		case s.buft == mappedCPU && mlock:
			b.Resident = s.last
			b.Note = fmt.Sprintf("mapped span, locked by --mlock from the file's start: %s stay resident, none of it reclaimable", mib(s.last))
		case s.buft == mappedCPU && s.used < b.Bytes:
			b.Resident = s.used
			b.Note = fmt.Sprintf("mapped span; %s of tensors used in place stay resident, the other %s (weights repacked or copied to a GPU) is read once at load as clean file pages", mib(s.used), mib(b.Bytes-s.used))
		}
		out = append(out, b)
	}
	for _, s := range tl.sums {
		n := s.n
		if host != nil && s.k.device == cpu && s.k.buft == host.HostBuffer() {
			n += host.hostPad()
		}
		out = append(out, Buffer{Device: s.k.device, BufferType: s.k.buft, Kind: KindModel, Bytes: n})
	}
	return out
}
