package gguf

import (
	"errors"
	"runtime"
	"testing"

	"github.com/headroom-llm/headroom/internal/ggufattack"
)

// allocated runs f and returns the bytes it allocated on the heap, all
// of them, garbage included: an upper bound on how far it raised the heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestAttacksStayInBudget replays each header that broke the bound (870
// MB, 523-786 MB and 481 MB of RSS against a 256 MiB bound) and checks
// that the parse allocates no more than the bound, whether it accepts the
// header or refuses it.
func TestAttacksStayInBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates up to 256 MiB per case")
	}
	const slack = 2 << 20 // errors, the test's own bookkeeping
	for name, g := range ggufattack.All() {
		t.Run(name, func(t *testing.T) {
			var err error
			var b *Budget
			n := allocated(func() {
				b = NewBudget(DefaultMaxAlloc)
				var f *File
				f, err = ReadWith(g, g.Size, Options{Budget: b})
				runtime.KeepAlive(f)
			})
			t.Logf("%s: allocated %d MiB, charged %d MiB, %v", name, n>>20, b.Used()>>20, err)
			if n > DefaultMaxAlloc+slack {
				t.Errorf("the parse allocated %d bytes, over the %d-byte bound", n, DefaultMaxAlloc)
			}
			if err != nil && !errors.Is(err, ErrLimit) {
				t.Errorf("error %v; want ErrLimit or success", err)
			}
			// The budget must not be a fiction either: what was charged
			// covers what was allocated.
			if int64(n) > b.Used()+slack {
				t.Errorf("allocated %d bytes but charged only %d", n, b.Used())
			}
		})
	}
}
