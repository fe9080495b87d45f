package cli

import (
	"strings"

	"github.com/headroom-llm/headroom/plan"
)

// programFlag is --program: the llama.cpp program the profile is for.
func programFlag(fs *flags) *string {
	names := make([]string, 0, 4)
	for _, p := range plan.Programs() {
		names = append(names, string(p))
	}
	return fs.String("program", string(plan.ProgramServer), "the llama.cpp `program` that will run the model: "+strings.Join(names, ", ")+
		" (a llama.cpp context as node-llama-cpp makes one); llama-completion and library keep n_batch logits rows where llama-server and llama-cli keep one per slot, and only llama-server opens 4 unified slots unless -np says otherwise")
}

// programLabel is what a verdict says of the program: nothing for
// llama-server, which every line assumes, else its name.
func programLabel(p plan.Program) string {
	if p.IsServer() {
		return ""
	}
	return " (" + p.Words() + ")"
}

// serverOnly refuses, for a program other than llama-server, the flags
// that ask llama.cpp's own tools (llama-fit-params, llama-bench), which
// run llama-server's context rather than that program's.
func serverOnly(pr plan.Program, verify, bench bool) error {
	switch {
	case pr.IsServer():
	case verify:
		return usagef("--verify asks llama-fit-params about llama-server's context; not taken with --program %s", pr)
	case bench:
		return usagef("--bench measures with llama-bench, not %s; not taken with --program %s", pr.Words(), pr)
	}
	return nil
}
