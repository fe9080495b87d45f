package plan

import "strings"

// LockedBytes is what --mlock asks the kernel to lock for the main
// model, as llama.cpp does it: mapped, the CPU's mapping from the file's
// start to the end of its span (Buffer.Resident under Mlock); loaded
// (--load-mode mlock, or --mlock with --no-mmap), every model buffer the
// CPU addresses directly, the CPU's own and a GPU's pinned host buffer
// (ggml_backend_buffer_is_host: CPU_REPACK is not, and stays unlocked).
// 0 without Mlock.
func LockedBytes(bufs []Buffer, p Profile) int64 {
	if !p.Mlock {
		return 0
	}
	var n int64
	for _, b := range bufs {
		if b.Kind != KindModel || b.Model != "" {
			continue
		}
		switch {
		case b.BufferType == mappedCPU:
			n += b.ResidentBytes()
		case !p.Mmap && (b.BufferType == "CPU" || strings.HasSuffix(b.BufferType, "_Host")):
			n += b.Bytes
		}
	}
	return n
}
