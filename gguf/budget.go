package gguf

import (
	"fmt"
	"sync"
	"unsafe"
)

// Budget is the heap one header parse may take: what the parser keeps and
// what the reader under it buffers (source's range reader charges the
// bytes it holds to the same Budget). Charges are what allocations really
// cost, struct and map overhead included, and are never given back, so
// Used bounds the bytes allocated, garbage included. It is safe for
// concurrent use.
type Budget struct {
	mu    sync.Mutex
	limit int64
	used  int64
}

// NewBudget returns a budget of limit bytes.
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// Charge takes n bytes, or fails with an error wrapping ErrLimit and takes
// nothing.
func (b *Budget) Charge(n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n < 0 || n > b.limit-b.used {
		return fmt.Errorf("%w: needs %d more bytes of memory, over the %d-byte allocation bound for a header (%d already taken)", ErrLimit, n, b.limit, b.used)
	}
	b.used += n
	return nil
}

// Used returns the bytes charged so far.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Limit returns the budget's bound.
func (b *Budget) Limit() int64 { return b.limit }

// What the parser's values cost on the heap beyond their bytes, measured
// from the types (a value's slot in its slice, an array's own struct, a
// map entry with the map's slack) rather than guessed.
const (
	valueCost  = int64(unsafe.Sizeof(Value{}))
	arrayCost  = int64(unsafe.Sizeof(ArrayValue{}))
	mapEntry   = 48 // a string key and an int, at the map's load factor
	kvCost     = int64(unsafe.Sizeof(KV{})) + mapEntry
	tensorCost = int64(unsafe.Sizeof(TensorInfo{})) + mapEntry + 8 + 8 // names entry, start, sort order
	shapeCost  = 32                                                    // up to four dimensions, one allocation
	// smallAlloc is the least a heap allocation costs with its rounding.
	smallAlloc = 16
)
