package hw

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// MeasureBandwidth measures this machine's memory read bandwidth: every
// core sums its share of a 256 MiB array, best of three passes. The
// figure is what a multi-threaded reader such as llama.cpp's CPU backend
// can stream, measured rather than looked up, and used where no
// specification is known. It takes a few hundred milliseconds.
func MeasureBandwidth(ctx context.Context) (gbps float64, how string, err error) {
	const size = 256 << 20
	buf := make([]uint64, size/8)
	for i := range buf {
		buf[i] = uint64(i) // touch every page so the reads hit memory
	}
	workers := runtime.GOMAXPROCS(0)
	best := time.Duration(1<<63 - 1)
	var sink uint64
	for pass := 0; pass < 3; pass++ {
		if err := ctx.Err(); err != nil {
			return 0, "", err
		}
		var wg sync.WaitGroup
		sums := make([]uint64, workers)
		start := time.Now()
		for w := range workers {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				lo, hi := len(buf)*w/workers, len(buf)*(w+1)/workers
				var s uint64
				for _, x := range buf[lo:hi] {
					s += x
				}
				sums[w] = s
			}(w)
		}
		wg.Wait()
		best = min(best, time.Since(start))
		for _, s := range sums {
			sink += s
		}
	}
	if best <= 0 || sink == 0 {
		return 0, "", fmt.Errorf("hw: memory bandwidth measurement gave no usable time")
	}
	gbps = float64(size) / best.Seconds() / 1e9
	return gbps, fmt.Sprintf("measured here: %d threads reading 256 MiB, best of 3 passes", workers), nil
}
