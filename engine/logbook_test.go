package engine

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestReadLines(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", maxLineBytes+5000)
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"plain", "one\ntwo\n", []string{"one", "two"}},
		{"no final newline", "one\ntwo", []string{"one", "two"}},
		{"crlf", "one\r\ntwo\r\n", []string{"one", "two"}},
		{"empty lines kept", "one\n\nthree\n", []string{"one", "", "three"}},
		{"long line cut", long + "\nnext\n", []string{long[:maxLineBytes], "next"}},
		{"nothing", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			readLines(strings.NewReader(tt.in), func(l string) { got = append(got, l) })
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %d lines %.80q, want %d %.80q", len(got), got, len(tt.want), tt.want)
			}
		})
	}
}

func TestLogBookTail(t *testing.T) {
	t.Parallel()
	var b logBook
	b.add("load_tensors:   CPU_Mapped model buffer size =  8135.02 MiB")
	for i := range TailLines + 10 {
		b.add("srv  log_server_r: request: GET /health 127.0.0.1 200 " + strings.Repeat("x", i%3))
	}
	tail := b.tail(0)
	if len(tail) != TailLines {
		t.Fatalf("%d lines kept, want the last %d", len(tail), TailLines)
	}
	if got := b.tail(3); !reflect.DeepEqual(got, tail[len(tail)-3:]) {
		t.Errorf("tail(3) = %q, want %q", got, tail[len(tail)-3:])
	}
	// The buffer line scrolled out of the tail but is still reported.
	if got := b.logged(); len(got) != 1 || got[0].Printed != "8135.02" {
		t.Errorf("logged() = %+v, want the model buffer kept past the tail", got)
	}
}

func TestFailureSignals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line       string
		oom, error bool
	}{
		{"ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4403.49 MiB on device 0: cudaMalloc failed: out of memory", true, false},
		{"0.05.982.175 E alloc_tensor_range: failed to allocate Vulkan0 buffer of size 1632174080", true, false},
		{"llama_model_load: error loading model: unable to allocate CUDA0 buffer", true, false},
		{"llama_init_from_model: failed to initialize the context: failed to allocate buffer for kv cache", true, false},
		{"ggml_aligned_malloc: insufficient memory (attempted to allocate 36000.00 MB)", true, false},
		{"ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 587202560", true, false},
		{"ggml_backend_alloc_ctx_tensors_from_buft: failed to allocate buffer", true, false},
		{"ggml_vulkan: Device memory allocation of size 2147483648 failed.", true, false},
		{"ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory", true, false},
		{"ggml_metal_synchronize: error: command buffer 0 failed with status 5 error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)", true, false},
		{"ggml_cuda_host_malloc: failed to allocate 512.00 MiB of pinned memory: out of memory", false, false},
		{"warning: failed to mlock 1024-byte buffer (after previously locking 0 bytes): Cannot allocate memory", false, false},
		{"llama_model_load: error loading model: error loading model vocabulary: unknown pre-tokenizer type", false, true},
		{"0.00.100.000 E main: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080", false, true},
		{"E srv    load_model: failed to load model, 'm.gguf'", false, true},
		{"common_fit_params: failed to fit params to free device memory: n_gpu_layers already set by user to 99, abort", false, false},
		{"0.00.100.000 I load_tensors:   CPU_Mapped model buffer size =  8135.02 MiB", false, false},
		{"0.00.100.000 W llama_context: n_ctx_seq (4096) < n_ctx_train (131072)", false, false},
	}
	for _, tt := range tests {
		if got := isAllocFailure(tt.line); got != tt.oom {
			t.Errorf("isAllocFailure(%q) = %v, want %v", tt.line, got, tt.oom)
		}
		if !tt.oom {
			if got := isErrorLine(tt.line); got != tt.error {
				t.Errorf("isErrorLine(%q) = %v, want %v", tt.line, got, tt.error)
			}
		}
	}
}

// TestSignalsPreferLoaderError: of several error lines, the loader's own
// message names the cause.
func TestSignalsPreferLoaderError(t *testing.T) {
	t.Parallel()
	var b logBook
	b.add("E common_init: something odd")
	b.add("E llama_model_load: error loading model: tensor 'blk.0.attn_q.weight' data is not within the file bounds")
	b.add("E main: exiting due to model loading error")
	oom, e := b.signals()
	if oom != "" || !strings.Contains(e, "not within the file bounds") {
		t.Errorf("signals() = %q, %q; want no OOM and the loader's error", oom, e)
	}
}

func TestFailureError(t *testing.T) {
	t.Parallel()
	f := &Failure{Reason: ReasonCompletionFailed, Detail: "POST /completion answered 500: {\n  \"error\": 1\n}"}
	if got, want := f.Error(), `llama-server did not become ready (completion_failed): POST /completion answered 500: { "error": 1 }`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got := excerpt(strings.Repeat("é", 300), 101); !strings.HasSuffix(got, "...") || len(got) > 104 || !strings.HasPrefix(got, "éé") || !utf8.ValidString(got) {
		t.Errorf("excerpt cut a rune or did not shorten: %q", got)
	}
}
