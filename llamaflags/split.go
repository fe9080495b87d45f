package llamaflags

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Arg is one llama.cpp flag of a command line with its values.
type Arg struct {
	*Entry
	// Typed is the flag as the user typed it (-fa, --ctx-size=4096).
	Typed string
	// Name is the spelling llama.cpp takes for it.
	Name string
	// Values follow the flag: Entry.Values of them.
	Values []string
}

// Words is the argument as llama.cpp reads it: the flag's spelling, then
// its values.
func (a Arg) Words() []string { return append([]string{a.Name}, a.Values...) }

// Said is the argument for a message: the flag as typed, a secret's value
// masked.
func (a Arg) Said() string {
	w := []string{a.Typed}
	for _, v := range a.Values {
		if a.secret() {
			v = "***"
		}
		w = append(w, v)
	}
	return strings.Join(w, " ")
}

func (a Arg) secret() bool {
	return slices.Contains([]string{"--api-key", "--hf-token"}, a.Key())
}

// Line is a command line read against a table: the words a command's own
// flag set parses (its flags, the modeled llama.cpp flags it defines, and
// the model as positional arguments) and the flags passed through.
type Line struct {
	// Own are the words for the command's flag set, in order.
	Own []string
	// Pass are the llama.cpp flags that change nothing headroom counts,
	// in order, to be handed to llama-server as they are.
	Pass []Arg
	// Program is the llama.cpp program a pasted line named (after
	// "--"), "" where it named none.
	Program Program
}

// PassWords are the passed-through flags as llama.cpp reads them.
func (l Line) PassWords() []string {
	var out []string
	for _, a := range l.Pass {
		out = append(out, a.Words()...)
	}
	return out
}

// PassSaid lists the passed-through flags for a message.
func (l Line) PassSaid() string {
	var out []string
	for _, a := range l.Pass {
		out = append(out, a.Said())
	}
	return strings.Join(out, " ")
}

// NotFor is an error naming the passed-through flags program p does not
// take (llama-cli's -p given to llama-server); nil when it takes all.
func (l Line) NotFor(p Program) error {
	for _, a := range l.Pass {
		if !a.Accepts(p) {
			return fmt.Errorf("%s is not a flag of %s (only %s)", a.Typed, p, joinPrograms(a.Programs))
		}
	}
	return nil
}

func joinPrograms(ps []Program) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = string(p)
	}
	if len(s) == 1 {
		return s[0] + " takes it"
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1] + " take it"
}

// Own says how a command's flag set takes a name: whether it defines it,
// and whether it is a flag without a value.
type Own func(name string) (defined, boolean bool)

// ErrRefused is the error of a refused flag: the flag as typed and why.
type ErrRefused struct {
	Typed, Why string
}

func (e ErrRefused) Error() string { return fmt.Sprintf("%s: %s", e.Typed, e.Why) }

// Split reads args against the table: a name own defines stays the
// command's, with its value; -m, --model and -hf (with -hff, a file of
// its repository) become the model's reference (hf:REPO[:QUANT] or
// hf:REPO/FILE); a pass-through flag of the table is taken out with its
// values; a refused one is an ErrRefused; a modeled one the command does
// not define is an error that says so. Names neither knows stay for the
// flag set, which reports them. After "--" a llama.cpp program's name
// (and only that) may start a pasted line; words after it are read the
// same way. A pasted llama-server line that names no model would start
// its router, which is refused.
func (t *Table) Split(args []string, own Own) (Line, error) {
	var l Line
	args, err := l.dropProgram(args)
	if err != nil {
		return l, err
	}
	hfAt, hfFile, model := -1, "", false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			l.Own = append(l.Own, args[i:]...)
			model = model || i+1 < len(args)
			break
		}
		if !strings.HasPrefix(a, "-") || len(a) < 2 || isNumber(a) {
			l.Own, model = append(l.Own, a), true
			continue
		}
		name, value, hasValue := strings.Cut(a, "=")
		bare := strings.TrimLeft(name, "-")
		if defined, boolean := own(bare); defined {
			l.Own = append(l.Own, a)
			// Its value is its own, whatever it looks like, as
			// llama-server reads it: "-fa -hf X" gives -fa the value -hf.
			if !hasValue && !boolean && i+1 < len(args) {
				i++
				l.Own = append(l.Own, args[i])
			}
			continue
		}
		e := t.Lookup(name)
		if e == nil {
			l.Own = append(l.Own, a)
			continue
		}
		var vals []string
		if hasValue {
			vals = []string{value}
		}
		for len(vals) < e.Values && i+1 < len(args) {
			i++
			vals = append(vals, args[i])
		}
		if len(vals) < e.Values || hasValue && e.Values == 0 {
			return l, fmt.Errorf("%s takes %s", name, valuesSaid(e))
		}
		switch e.Use {
		case Model:
			switch e.Key() {
			case "--hf-repo":
				hfAt, model = len(l.Own), true
				l.Own = append(l.Own, "hf:"+vals[0])
			case "--hf-file":
				hfFile = vals[0]
			default:
				l.Own, model = append(l.Own, vals[0]), true
			}
		case PassThrough:
			l.Pass = append(l.Pass, Arg{Entry: e, Typed: name, Name: e.Spelling(name), Values: vals})
		case Refused:
			return l, ErrRefused{Typed: name, Why: e.Why}
		default:
			return l, fmt.Errorf("%s is llama.cpp's %s, which headroom counts, but this command does not take it", name, e.Key())
		}
	}
	switch {
	case hfFile != "" && hfAt < 0:
		return l, fmt.Errorf("-hff %s names a file of the -hf repository, and no -hf was given", hfFile)
	case hfFile != "":
		// llama.cpp: the file overrides the quant of -hf REPO[:QUANT].
		repo, _, _ := strings.Cut(strings.TrimPrefix(l.Own[hfAt], "hf:"), ":")
		l.Own[hfAt] = "hf:" + repo + "/" + hfFile
	case l.Program == Server && !model:
		return l, ErrRefused{Typed: "llama-server with no model (-m, -hf)", Why: whyRouter}
	}
	return l, nil
}

// valuesSaid is how many values a flag takes, for an error.
func valuesSaid(e *Entry) string {
	switch e.Values {
	case 0:
		return "no value"
	case 1:
		return "a value (" + e.Hint + ")"
	}
	return fmt.Sprintf("%d values (%s)", e.Values, e.Hint)
}

// isNumber reports whether a word is a negative number, a value and not a
// flag.
func isNumber(a string) bool {
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	for _, r := range a[1:] {
		if !(r >= '0' && r <= '9' || r == '.') {
			return false
		}
	}
	return true
}

// dropProgram takes a pasted program out: after "--", a llama.cpp
// program's name and any NAME=VALUE words before it, which are refused:
// the environment can change the devices llama.cpp sees
// (CUDA_VISIBLE_DEVICES) or its flags (LLAMA_ARG_*), and a pasted line's
// is not applied. A whole command in one quoted word is split as a shell
// would.
func (l *Line) dropProgram(args []string) ([]string, error) {
	for i, a := range args {
		if a != "--" && !(strings.ContainsAny(a, " \t") && programOf(firstWord(a)) != "") {
			continue
		}
		var rest []string
		if a == "--" {
			rest = args[i+1:]
		} else {
			words, err := ShellWords(a)
			if err != nil {
				return nil, err
			}
			rest = append(words, args[i+1:]...)
		}
		j := 0
		for j < len(rest) && envAssignment(rest[j]) {
			j++
		}
		if j == len(rest) || programOf(rest[j]) == "" {
			break
		}
		if j > 0 {
			return nil, fmt.Errorf("%s sets %s's environment, which headroom does not apply from a pasted line: "+
				"it can hide devices or set flags (LLAMA_ARG_*), so a verdict without it could be for another load; "+
				"drop it, and name the devices with --machine if it hides some", strings.Join(rest[:j], " "), rest[j])
		}
		l.Program = programOf(rest[j])
		return append(args[:i:i], rest[j+1:]...), nil
	}
	return args, nil
}

func firstWord(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// programOf is the program a pasted word names (a path whose base name is
// llama-server, llama-cli or llama-completion, with a suffix such as
// .exe), "" for any other word.
func programOf(word string) Program {
	base := filepath.Base(word)
	for _, p := range []Program{Server, Completion, CLI} {
		if base == string(p) || strings.HasPrefix(base, string(p)+".") {
			return p
		}
	}
	return ""
}

// envAssignment reports whether a word of a pasted line sets an
// environment variable for the program after it (NAME=VALUE).
func envAssignment(a string) bool {
	name, _, ok := strings.Cut(a, "=")
	if !ok || name == "" || strings.HasPrefix(name, "-") {
		return false
	}
	for i, r := range name {
		if r != '_' && !(r >= 'A' && r <= 'Z') && !(r >= 'a' && r <= 'z') && !(i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Only keeps of a llama.cpp command line the flags program p takes, each
// with its values, and returns the ones it left out as typed: a tool is
// given only what its own table accepts (llama-fit-params takes no -kvu,
// -cram or --api-key; llama-server refuses each of them nowhere). Words
// that are not flags of the table (values, a model path) are kept.
func (t *Table) Only(p Program, args []string) (kept, left []string) {
	for i := 0; i < len(args); i++ {
		e := t.Lookup(args[i])
		if e == nil || strings.Contains(args[i], "=") {
			if e != nil && !e.Accepts(p) {
				left = append(left, args[i])
				continue
			}
			kept = append(kept, args[i])
			continue
		}
		end := min(i+1+e.Values, len(args))
		if e.Accepts(p) {
			kept = append(kept, args[i:end]...)
		} else {
			left = append(left, args[i:end]...)
		}
		i = end - 1
	}
	return kept, left
}
