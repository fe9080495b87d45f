package cli

import (
	"fmt"
	"github.com/headroom-llm/headroom/request"

	"github.com/headroom-llm/headroom/llamaflags"
	"github.com/headroom-llm/headroom/plan"
)

// split reads a command line against llama.cpp's argument table
// (llamaflags): the command's own flags and the modeled llama.cpp ones
// it defines stay for its flag set, -m and -hf become the model, flags
// that change nothing headroom counts are kept aside to be passed
// through, refused ones are an error that says why. A pasted command
// line (after "--", or whole in one quoted word) is read the same way.
func (f *flags) split(args []string) error {
	tb, err := llamaflags.Union()
	if err != nil {
		return err
	}
	f.line, err = tb.Split(args, f.own)
	if err != nil {
		return usagef("%v", err)
	}
	return nil
}

// own says whether the command's flag set defines a name, and whether it
// takes no value; -h and --help are the flag package's own.
func (f *flags) own(name string) (defined, boolean bool) {
	if name == "h" || name == "help" {
		return true, true
	}
	return request.Defines(f.FlagSet)(name)
}

// pastedProgram applies the program a pasted line named: llama-cli or
// llama-completion sets --program where the command has one and it was
// not given otherwise. The passed-through flags must be the program's,
// and are said once on standard error. A command that runs no llama.cpp
// program (inspect) takes none.
func (f *flags) pastedProgram() error {
	if f.Lookup("ctx-size") == nil {
		if len(f.line.Pass) > 0 || f.line.Program != "" {
			return usagef("%s reads the model's header and runs no llama.cpp program: llama.cpp's flags are for fit, plan and serve", f.Name())
		}
		return nil
	}
	pr := plan.ProgramServer
	if fl := f.Lookup("program"); fl != nil {
		named := plan.Program(f.line.Program)
		switch {
		case named == "":
		case !f.isSet("program"):
			if err := f.Set("program", string(named)); err != nil {
				return usagef("%v", err)
			}
		case fl.Value.String() != string(named):
			return usagef("the pasted line runs %s and --program says %s: give one", named, fl.Value)
		}
		pr = plan.Program(fl.Value.String())
	} else if f.line.Program != "" && f.line.Program != llamaflags.Server {
		return usagef("headroom %s runs llama-server; the pasted line is for %s", f.Name(), f.line.Program)
	}
	if pr == plan.ProgramLibrary {
		if len(f.line.Pass) > 0 {
			return usagef("a library context (--program library) takes no llama.cpp command line: %s", f.line.PassSaid())
		}
		return nil
	}
	if err := f.line.NotFor(llamaflags.Program(pr)); err != nil {
		return usagef("%v", err)
	}
	if len(f.line.Pass) > 0 {
		fmt.Fprintf(f.env.Stderr, "headroom %s: passed through to %s (no effect on memory): %s\n", f.Name(), pr, f.line.PassSaid())
	}
	return nil
}

// pastedHelp is the paragraph of fit's and plan's help on pasted
// llama.cpp command lines.
const pastedHelp = `A llama-server command line can be pasted after "--" (-- llama-server -m
FILE -c 8192 ...), or its flags given with -m FILE or -hf REPO:QUANT
(and -hff FILE), or the whole line given in quotes. Every flag is read
against the build's own argument table (docs/llama-flags.md): flags that
change nothing headroom counts (threads, the HTTP server and its
--api-key, sampling, logging, templates) are passed through, said on
standard error and written into the printed command; --mlock is
accounted (the weights locked in RAM, RLIMIT_MEMLOCK checked); flags
that change memory in ways headroom does not count (--lora,
--spec-type, -sm, -dev, ...), the router's (a line with no model,
--models-dir) and VAR=VALUE before the program are refused with the
reason. A pasted llama-cli or llama-completion line sets --program.`
