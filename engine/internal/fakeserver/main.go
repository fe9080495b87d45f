// Command fakeserver stands in for llama.cpp's llama-server in tests. It
// takes the same -m, --host and --port flags (and ignores the rest), prints
// a log shaped like llama.cpp's, and serves /health and /completion the way
// llama-server does, or fails the way it is known to fail.
//
// Environment:
//
//	FAKE_LLAMA_MODE   good (default), init-oom, broken-health,
//	                  broken-completion, error-exit, silent-exit,
//	                  never-ready, slow-exit, crash-after-ready, sleep
//	FAKE_LLAMA_ARGV   file to write the arguments to, as a JSON array
//	FAKE_LLAMA_LOG    file whose lines are printed as the load log instead
//	                  of the built-in one (to replay a recorded log)
//	FAKE_LLAMA_LOAD_MS  how long loading takes (default 200)
//	FAKE_LLAMA_CHILD  file to write the pid of a child process to; the
//	                  child sleeps until killed (to test process groups)
//
// The modes:
//
//	good               loads, then /health 200 and /completion 200
//	init-oom           the model buffer allocation fails; exits 1
//	broken-health      a compute buffer allocation fails, yet it reports
//	                   the model loaded: /health 200, /completion 500
//	broken-completion  loads cleanly, but /completion answers 500
//	error-exit         the model file is rejected; exits 1
//	silent-exit        exits 3 without a word
//	never-ready        /health 503 forever
//	slow-exit          like good, but ignores SIGTERM
//	crash-after-ready  like good, but exits 134 half a second after its
//	                   first completion (a crash while serving)
//	sleep              sleeps until killed (the child of FAKE_LLAMA_CHILD)
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

type fake struct {
	mode  string
	model string
	host  string
	port  int
	start time.Time
	ready atomic.Bool
}

func main() {
	f := &fake{mode: os.Getenv("FAKE_LLAMA_MODE"), host: "127.0.0.1", port: 8080, start: time.Now()}
	if f.mode == "" {
		f.mode = "good"
	}
	if f.mode == "sleep" {
		select {}
	}
	args := os.Args[1:]
	if path := os.Getenv("FAKE_LLAMA_ARGV"); path != "" {
		data, _ := json.Marshal(args)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "fakeserver:", err)
			os.Exit(2)
		}
	}
	for i := 0; i < len(args); i++ {
		next := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch args[i] {
		case "--version":
			fmt.Fprintln(os.Stderr, "load_backend: loaded CPU backend from /usr/local/lib/libggml-cpu-haswell.so")
			fmt.Fprintln(os.Stderr, "version: 6789 (abc1234)")
			fmt.Fprintln(os.Stderr, "built with cc (Debian 12.2.0-14) 12.2.0 for x86_64-linux-gnu")
			os.Exit(0)
		case "-m", "--model":
			f.model = next()
		case "--host":
			f.host = next()
		case "--port":
			p, err := strconv.Atoi(next())
			if err != nil {
				fmt.Fprintln(os.Stderr, "error: invalid --port")
				os.Exit(1)
			}
			f.port = p
		}
	}
	if path := os.Getenv("FAKE_LLAMA_CHILD"); path != "" {
		f.spawnChild(path)
	}
	f.run()
}

// spawnChild starts a sleeping copy of this program, which inherits the
// process group and the output pipe, as a helper process of a real server
// would.
func (f *fake) spawnChild(pidFile string) {
	self, err := os.Executable()
	if err != nil {
		f.die(2, "fakeserver: %v", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "FAKE_LLAMA_MODE=sleep", "FAKE_LLAMA_CHILD=")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		f.die(2, "fakeserver: %v", err)
	}
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		f.die(2, "fakeserver: %v", err)
	}
}

// logf prints a line as llama-server does: minutes.seconds.ms.us since
// start, the level letter, the message.
func (f *fake) logf(level byte, format string, a ...any) {
	us := time.Since(f.start).Microseconds()
	fmt.Fprintf(os.Stderr, "%d.%02d.%03d.%03d %c %s\n", us/60e6, us/1e6%60, us/1000%1000, us%1000, level, fmt.Sprintf(format, a...))
}

func (f *fake) die(code int, format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(code)
}

func (f *fake) run() {
	switch f.mode {
	case "silent-exit":
		os.Exit(3)
	case "good", "init-oom", "broken-health", "broken-completion", "error-exit", "never-ready", "slow-exit", "crash-after-ready":
	default:
		f.die(2, "fakeserver: unknown FAKE_LLAMA_MODE %q", f.mode)
	}
	stop := make(chan os.Signal, 1)
	child := os.Getenv("LLAMA_SERVER_ROUTER_PORT") != ""
	switch {
	case f.mode == "slow-exit":
		signal.Ignore(syscall.SIGTERM)
	case !child:
		signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	}

	// llama-server listens before it loads, answering 503 meanwhile.
	l, err := net.Listen("tcp", net.JoinHostPort(f.host, strconv.Itoa(f.port)))
	if err != nil {
		f.logf('E', "main: couldn't bind HTTP server socket, hostname: %s, port: %d", f.host, f.port)
		os.Exit(1)
	}
	go func() { _ = http.Serve(l, f.handler()) }()
	fmt.Fprintf(os.Stdout, "build: 6789 (abc1234) with cc (Debian 12.2.0-14) 12.2.0 for x86_64-linux-gnu\n")
	f.logf('I', "main: HTTP server is listening, hostname: %s, port: %d, http threads: 7", f.host, f.port)
	f.logf('I', "main: loading model")
	f.logf('I', "srv    load_model: loading model '%s'", f.model)

	load := 200 * time.Millisecond
	if ms, err := strconv.Atoi(os.Getenv("FAKE_LLAMA_LOAD_MS")); err == nil {
		load = time.Duration(ms) * time.Millisecond
	}
	f.printLoad()
	if child {
		// As llama-server tells its router how far the load has come.
		for _, v := range []string{"0.0", "0.5", "1.0"} {
			fmt.Fprintf(os.Stdout, "cmd_child_to_router:state:{\"state\":\"loading\",\"payload\":{\"stages\":[\"text_model\"],\"current\":\"text_model\",\"value\":%s}}\n", v)
			time.Sleep(load / 3)
		}
	} else {
		time.Sleep(load)
	}
	switch f.mode {
	case "init-oom", "error-exit":
		f.logf('E', "main: exiting due to model loading error")
		os.Exit(1)
	case "never-ready":
	default:
		f.logf('I', "srv          init: initializing slots, n_slots = 1")
		f.logf('I', "main: model loaded")
		f.logf('I', "main: server is listening on http://%s - starting the main loop", net.JoinHostPort(f.host, strconv.Itoa(f.port)))
		if child {
			// llama-server installs its handler once loaded: a signal
			// before that ends it at once.
			if f.mode != "slow-exit" {
				signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
			}
			fmt.Fprintln(os.Stdout, `cmd_child_to_router:state:{"state":"ready","payload":{"id":"model"}}`)
		}
		f.ready.Store(true)
	}
	if child && f.ready.Load() {
		// A ready router's child stops on the router's word on its input
		// and exits when the input closes. A signal is noted: llama-server
		// runs its shutdown in the signal's handler, where it can hang
		// (engine.Server.stop), so a ready child must not get one.
		told := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(os.Stdin)
			for sc.Scan() {
				if strings.Contains(sc.Text(), "cmd_router_to_child:exit") {
					close(told)
					return
				}
			}
			f.logf('I', "srv    operator(): EOF on stdin detected, forcing shutdown...")
			os.Exit(1)
		}()
		select {
		case <-told:
		case <-stop:
			f.logf('W', "fakeserver: a signal reached a ready router's child")
			<-told
		}
	} else {
		<-stop
	}
	f.logf('I', "srv    operator(): operator(): cleaning up before exit...")
	os.Exit(0)
}

// printLoad prints the load log: a replayed one, or one shaped like a
// CUDA load of an 8B model, with the mode's failure in it.
func (f *fake) printLoad() {
	if path := os.Getenv("FAKE_LLAMA_LOG"); path != "" {
		file, err := os.Open(path)
		if err != nil {
			f.die(2, "fakeserver: %v", err)
		}
		defer file.Close()
		sc := bufio.NewScanner(file)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintln(os.Stderr, sc.Text())
		}
		return
	}
	f.logf('I', "llama_model_loader: loaded meta data with 30 key-value pairs and 291 tensors from %s (version GGUF V3 (latest))", f.model)
	f.logf('I', "print_info: file size   = 4.58 GiB (4.89 BPW) ")
	f.logf('I', "load_tensors: loading model tensors, this can take a while... (mmap = true)")
	f.logf('I', "load_tensors: offloading 32 repeating layers to GPU")
	f.logf('I', "load_tensors: offloaded 33/33 layers to GPU")
	switch f.mode {
	case "init-oom":
		f.logf('E', "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4403.49 MiB on device 0: cudaMalloc failed: out of memory")
		f.logf('E', "alloc_tensor_range: failed to allocate CUDA0 buffer of size 4617387008")
		f.logf('E', "llama_model_load: error loading model: unable to allocate CUDA0 buffer")
		f.logf('E', "llama_model_load_from_file_impl: failed to load model")
		f.logf('E', "srv    load_model: failed to load model, '%s'", f.model)
		return
	case "error-exit":
		f.logf('E', "llama_model_load: error loading model: error loading model vocabulary: unknown pre-tokenizer type: 'fancy'")
		f.logf('E', "llama_model_load_from_file_impl: failed to load model")
		f.logf('E', "srv    load_model: failed to load model, '%s'", f.model)
		return
	}
	f.logf('I', "load_tensors:   CPU_Mapped model buffer size =   281.81 MiB")
	f.logf('I', "load_tensors:        CUDA0 model buffer size =  4403.49 MiB")
	f.logf('I', "llama_context: n_ctx         = 8192")
	f.logf('I', "llama_context:  CUDA_Host  output buffer size =     0.49 MiB")
	f.logf('I', "llama_kv_cache:      CUDA0 KV buffer size =  1024.00 MiB")
	f.logf('I', "llama_kv_cache: size = 1024.00 MiB (  8192 cells,  32 layers,  1/1 seqs), K (f16):  512.00 MiB, V (f16):  512.00 MiB")
	if f.mode == "broken-health" {
		f.logf('E', "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 560.00 MiB on device 0: cudaMalloc failed: out of memory")
		f.logf('E', "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 587202560")
		f.logf('E', "graph_reserve: failed to allocate compute buffers")
		return
	}
	f.logf('I', "sched_reserve:      CUDA0 compute buffer size =   560.00 MiB")
	f.logf('I', "sched_reserve:  CUDA_Host compute buffer size =    24.01 MiB")
}

func (f *fake) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if !f.ready.Load() {
			reply(w, http.StatusServiceUnavailable, `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`)
			return
		}
		reply(w, http.StatusOK, `{"status":"ok"}`)
	})
	mux.HandleFunc("POST /completion", func(w http.ResponseWriter, r *http.Request) {
		if !f.ready.Load() {
			reply(w, http.StatusServiceUnavailable, `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`)
			return
		}
		var req struct {
			Prompt   *string `json:"prompt"`
			NPredict *int    `json:"n_predict"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Prompt == nil || req.NPredict == nil {
			reply(w, http.StatusBadRequest, `{"error":{"code":400,"message":"\"prompt\" and \"n_predict\" are required","type":"invalid_request_error"}}`)
			return
		}
		switch f.mode {
		case "broken-health":
			reply(w, http.StatusInternalServerError, `{"error":{"code":500,"message":"backend is in error state from a previous command buffer failure","type":"server_error"}}`)
		case "broken-completion":
			reply(w, http.StatusInternalServerError, `{"error":{"code":500,"message":"failed to decode the batch","type":"server_error"}}`)
		default:
			reply(w, http.StatusOK, fmt.Sprintf(`{"index":0,"content":"Hi","tokens":[],"id_slot":0,"stop":true,"model":%q,"tokens_predicted":%d,"tokens_evaluated":2}`, f.model, *req.NPredict))
			if f.mode == "crash-after-ready" {
				time.AfterFunc(500*time.Millisecond, func() {
					fmt.Fprintln(os.Stderr, "GGML_ASSERT(ctx) failed")
					os.Exit(134)
				})
			}
		}
	})
	return mux
}

func reply(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}
