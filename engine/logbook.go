package engine

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"sync"
)

// Limits on what a server keeps of its log. A server can run for weeks
// and log every request, so the log is kept as a ring of recent lines plus
// the few lines that matter later: the buffer sizes (for Logged) and the
// first signs of failure.
const (
	// TailLines is how many of the most recent log lines a Server keeps.
	TailLines = 2000
	// maxKeptLines bounds the buffer-size lines kept besides the tail; a
	// real load prints a few dozen.
	maxKeptLines = 10000
	// maxLineBytes bounds one log line; the rest of a longer line is
	// dropped (a request body echoed at debug verbosity can be huge).
	maxLineBytes = 64 << 10
	// maxErrorLines bounds the error lines remembered for classification.
	maxErrorLines = 16
)

// logBook holds what a Server keeps of its child's log. It is written by
// the one goroutine reading the child's output and read by any.
type logBook struct {
	mu    sync.Mutex
	ring  []string // the last TailLines lines, oldest at next once full
	next  int
	total int
	kept  []string // lines ParseLog reads, in order
	oom   string   // the first allocation-failure line
	errs  []string // the first error lines
}

func (b *logBook) add(line string) {
	clean := cleanLine(line)
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.ring) < TailLines {
		b.ring = append(b.ring, clean)
	} else {
		b.ring[b.next] = clean
		b.next = (b.next + 1) % TailLines
	}
	b.total++
	if parseRelevant(clean) && len(b.kept) < maxKeptLines {
		b.kept = append(b.kept, clean)
	}
	switch {
	case b.oom == "" && isAllocFailure(clean):
		b.oom = clean
	case len(b.errs) < maxErrorLines && isErrorLine(clean):
		b.errs = append(b.errs, clean)
	}
}

// tail returns the last n lines (all kept ones when n <= 0).
func (b *logBook) tail(n int) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ordered := make([]string, 0, len(b.ring))
	ordered = append(ordered, b.ring[b.next:]...)
	ordered = append(ordered, b.ring[:b.next]...)
	if n > 0 && n < len(ordered) {
		ordered = ordered[len(ordered)-n:]
	}
	return ordered
}

func (b *logBook) logged() []Logged {
	b.mu.Lock()
	kept := append([]string(nil), b.kept...)
	b.mu.Unlock()
	return ParseLog(kept)
}

// signals returns the first allocation-failure line ("" if none) and the
// most telling error line ("" if none).
func (b *logBook) signals() (oom, errLine string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		// The loader's own message names the cause; later lines only say
		// that loading failed.
		if strings.Contains(e, "error loading model") {
			return b.oom, e
		}
	}
	if len(b.errs) > 0 {
		errLine = b.errs[0]
	}
	return b.oom, errLine
}

// readLines calls fn with each line read from r (without its line ending)
// until r ends, cutting lines longer than maxLineBytes.
func readLines(r io.Reader, fn func(string)) {
	br := bufio.NewReaderSize(r, 16<<10)
	var long []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long) < maxLineBytes {
				long = append(long, chunk[:min(len(chunk), maxLineBytes-len(long))]...)
			}
			continue
		}
		if len(chunk) > 0 || len(long) > 0 {
			line := chunk
			if len(long) > 0 {
				if len(long) < maxLineBytes {
					long = append(long, chunk[:min(len(chunk), maxLineBytes-len(long))]...)
				}
				line = long
			}
			fn(strings.TrimRight(string(line), "\r\n"))
			long = long[:0]
		}
		if err != nil {
			return
		}
	}
}

// Allocation failures as llama.cpp and its backends report them:
// ggml-cuda ("cudaMalloc failed: out of memory"), ggml-backend
// ("alloc_tensor_range: failed to allocate CUDA0 buffer of size N"),
// ggml-alloc ("ggml_gallocr_reserve_n: failed to allocate ..."),
// llama-model ("unable to allocate CUDA0 buffer"), the KV cache ("failed to
// allocate buffer for kv cache"), the CPU backend ("ggml_aligned_malloc:
// insufficient memory"), Vulkan ("ErrorOutOfDeviceMemory", "Device memory
// allocation of size N failed") and Metal
// ("kIOGPUCommandBufferCallbackErrorOutOfMemory").
var allocFailureMarks = []string{
	"out of memory",
	"outofmemory",
	"outofdevicememory",
	"outofhostmemory",
	"failed to allocate",
	"unable to allocate",
	"alloc_ctx_tensors_from_buft: failed",
	"insufficient memory",
	"std::bad_alloc",
	"cudamalloc failed",
	"hipmalloc failed",
}

// Lines that name memory but report no fatal failure: pinned host memory
// falls back to pageable memory, and a failed mlock only leaves pages
// swappable.
var allocFailureExceptions = []string{
	"pinned memory",
	"mlock",
}

func isAllocFailure(line string) bool {
	l := strings.ToLower(line)
	for _, ex := range allocFailureExceptions {
		if strings.Contains(l, ex) {
			return false
		}
	}
	for _, m := range allocFailureMarks {
		if strings.Contains(l, m) {
			return true
		}
	}
	return strings.Contains(l, "memory allocation of size") && strings.Contains(l, "failed")
}

// Error lines other than allocation failures: llama.cpp's loader and
// server messages, and any line llama-server's log prefix marks with level
// E. The fit step's "failed to fit params" is advice, not a failure.
var errorMarks = []string{
	"error loading model",
	"failed to load model",
	"exiting due to",
	"couldn't bind",
	"error:",
	"terminate called",
}

func isErrorLine(line string) bool {
	l := strings.ToLower(line)
	if strings.Contains(l, "failed to fit params") {
		return false
	}
	if hasLevel(line, 'E') {
		return true
	}
	for _, m := range errorMarks {
		if strings.Contains(l, m) {
			return true
		}
	}
	return false
}

// hasLevel reports whether a line carries llama-server's level letter: "E "
// at the start, or after the "M.SS.mmm.uuu " timestamp.
func hasLevel(line string, level byte) bool {
	if i := strings.IndexByte(line, ' '); i > 0 && i < 16 && strings.Count(line[:i], ".") == 3 {
		line = line[i+1:]
	}
	return len(line) >= 2 && line[0] == level && line[1] == ' '
}
