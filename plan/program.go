package plan

import (
	"fmt"
	"strconv"
	"strings"
)

// Program is the llama.cpp program, or library context, a profile is for.
// They differ in what memory the same flags cost: llama-server reserves
// one logits row per slot where the others keep n_batch, and only
// llama-server opens four unified slots by default. The rules below are
// read from llama.cpp 80fb11a's source; the comments cite it.
type Program string

// The programs headroom plans for.
const (
	// ProgramServer is llama-server: -np auto is 4 slots over one unified
	// cache (tools/server/server.cpp:152-157), and the context reserves
	// one output row per slot (server-context.cpp:1014-1016,
	// server_output_limits).
	ProgramServer Program = "llama-server"
	// ProgramCLI is llama-cli, which runs llama-server in a thread with
	// its own parsed flags (tools/cli/cli-server.h:43-48,
	// cli-context.cpp:121-122): the server's output rows, but one
	// sequence unless -np says more (common.h:455: only llama-server's
	// parser makes -np auto, arg.cpp:1404-1405), no unified cache
	// (common.h:573) and no -kvu (arg.cpp:1732 leaves llama-cli out).
	ProgramCLI Program = "llama-cli"
	// ProgramCompletion is llama-completion: one context made by
	// common_init_from_params (completion.cpp:143), whose n_outputs_max
	// stays 0 (common.h:457, common.cpp:1725), which llama_context
	// reads as n_batch (llama-context.cpp:249). One sequence, no -kvu,
	// and no projector or draft (arg.cpp:60-65, 4257).
	ProgramCompletion Program = "llama-completion"
	// ProgramLibrary is a context made from llama_context_default_params
	// (llama-context.cpp:3615-3650), as node-llama-cpp makes one: n_batch
	// output rows, one sequence, and swa_full true (:3649), where the
	// programs' common_params default is false (common.h:572).
	// node-llama-cpp passes swaFullCache false and n_ubatch = n_batch,
	// so its contexts are --swa-full=false -ub N -b N. There is no
	// --fit: the library places what it is asked to.
	ProgramLibrary Program = "library"
)

// Programs lists every program, llama-server first.
func Programs() []Program {
	return []Program{ProgramServer, ProgramCLI, ProgramCompletion, ProgramLibrary}
}

// ParseProgram reads a program's name; "" is llama-server.
func ParseProgram(s string) (Program, error) {
	if s == "" {
		return ProgramServer, nil
	}
	for _, p := range Programs() {
		if string(p) == s {
			return p, nil
		}
	}
	names := make([]string, 0, 4)
	for _, p := range Programs() {
		names = append(names, string(p))
	}
	return "", fmt.Errorf("unknown program %q: want %s", s, strings.Join(names, ", "))
}

// OrServer reads the zero Program as llama-server.
func (pr Program) OrServer() Program {
	if pr == "" {
		return ProgramServer
	}
	return pr
}

// IsServer reports whether the program is llama-server.
func (pr Program) IsServer() bool { return pr.OrServer() == ProgramServer }

// BatchOutputs reports whether the program's context keeps n_batch output
// rows (n_outputs_max 0) rather than llama-server's one per slot.
func (pr Program) BatchOutputs() bool {
	switch pr.OrServer() {
	case ProgramCompletion, ProgramLibrary:
		return true
	}
	return false
}

// TakesUnifiedKV reports whether the program can share one KV cache among
// its sequences: llama-server's -kvu, a library's kv_unified.
func (pr Program) TakesUnifiedKV() bool {
	switch pr.OrServer() {
	case ProgramServer, ProgramLibrary:
		return true
	}
	return false
}

// TakesCompanions reports whether the program loads a projector (--mmproj)
// and a draft model (-md) beside the model.
func (pr Program) TakesCompanions() bool {
	switch pr.OrServer() {
	case ProgramServer, ProgramCLI:
		return true
	}
	return false
}

// Words names the program in a sentence.
func (pr Program) Words() string {
	if pr.OrServer() == ProgramLibrary {
		return "a library context"
	}
	return string(pr.OrServer())
}

// Defaults returns the program's own defaults: llama-server's -np auto
// (four slots, one unified cache); one sequence for the others, and a
// library context's full-size sliding-window caches.
func (pr Program) Defaults() Profile {
	p := Defaults()
	p.Program = pr.OrServer()
	switch p.Program {
	case ProgramServer:
		p.Parallel, p.KVUnified = 4, true
	case ProgramLibrary:
		p.SWAFull = true
	}
	return p
}

// Check refuses what the profile's program does not take, so that no
// verdict holds for a command line the program would reject.
func (p Profile) Check() error {
	pr := p.Program.OrServer()
	switch {
	case p.KVUnified && !pr.TakesUnifiedKV():
		return fmt.Errorf("%s takes no -kvu (common/arg.cpp gives it to llama-server and a few tools only): its sequences keep caches of their own", pr)
	case p.Companions != nil && !pr.TakesCompanions():
		return fmt.Errorf("%s loads no projector or draft model (--mmproj, -md are llama-server's and llama-cli's)", pr.Words())
	case pr == ProgramLibrary && p.CPUMoE > 0:
		return fmt.Errorf("a library context has no --n-cpu-moe: give the experts' placement as -ot (tensor_buft_overrides)")
	case p.Serving != nil && pr != ProgramServer && pr != ProgramCLI:
		return fmt.Errorf("%s keeps no prompt cache or context checkpoints (-cram, -ctxcp and -cms are llama-server's and llama-cli's)", pr.Words())
	case p.Serving != nil:
		return p.Serving.Check()
	}
	return nil
}

// Command is the profile as the program runs it: the program, the model
// as model names it (-m FILE, -hf REPO:QUANT), then the flags; for a
// library context, the parameters a program gives llama.cpp.
func (p Profile) Command(model []string) []string {
	if p.Program.OrServer() == ProgramLibrary {
		return append([]string{"library:"}, p.Args()...)
	}
	return append(append([]string{string(p.Program.OrServer())}, model...), p.Args()...)
}

// libraryArgs renders a library context as llama_model_params and
// llama_context_params fields, name=value, every one that the accounting
// depends on: the library's defaults are not the programs'.
func (p Profile) libraryArgs() []string {
	ngl := p.GPULayers
	if ngl == GPULayersAuto {
		ngl = -1 // llama_model_default_params: every layer
	}
	fa := map[FlashAttn]string{FlashOn: "enabled", FlashOff: "disabled"}[p.FlashAttn]
	if fa == "" {
		fa = "auto"
	}
	f := []string{"n_gpu_layers=" + strconv.Itoa(ngl), "use_mmap=" + strconv.FormatBool(p.Mmap)}
	if p.Mlock {
		f = append(f, "use_mlock=true")
	}
	if len(p.TensorSplit) > 0 {
		f = append(f, "tensor_split="+splitString(p.TensorSplit))
	}
	if len(p.Overrides) > 0 {
		f = append(f, "tensor_buft_overrides="+overrideFlag(p.Overrides))
	}
	f = append(f, "n_ctx="+strconv.Itoa(p.Ctx), "n_seq_max="+strconv.Itoa(max(p.Parallel, 1)),
		"n_batch="+strconv.Itoa(p.Batch), "n_ubatch="+strconv.Itoa(p.UBatch), "flash_attn_type="+fa,
		"type_k="+p.CacheK, "type_v="+p.CacheV, "swa_full="+strconv.FormatBool(p.SWAFull))
	if p.KVUnified {
		f = append(f, "kv_unified=true")
	}
	if p.NoKVOffload {
		f = append(f, "offload_kqv=false")
	}
	return f
}
