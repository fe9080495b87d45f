package cli

import (
	"flag"
	"fmt"
	"github.com/headroom-llm/headroom/internal/suggest"
	"io"
	"regexp"
	"slices"
	"strings"
)

// flagGroup is one flag under all its names: llama-server's flags have a
// short and a long spelling (-c, --ctx-size), registered as one Value.
type flagGroup struct {
	names []string
	flag  *flag.Flag
}

// groups gathers the flags of fs by Value, in the order they were first
// registered, with the shortest name first.
func (f *flags) groups() []flagGroup {
	var out []flagGroup
	f.VisitAll(func(fl *flag.Flag) {
		for i := range out {
			if sameValue(out[i].flag.Value, fl.Value) {
				out[i].names = append(out[i].names, fl.Name)
				return
			}
		}
		out = append(out, flagGroup{names: []string{fl.Name}, flag: fl})
	})
	// VisitAll is in name order; registration order is lost, so keep the
	// order stable by the group's longest name, as a reader looks it up.
	for i := range out {
		slices.SortStableFunc(out[i].names, func(a, b string) int { return len(a) - len(b) })
	}
	slices.SortStableFunc(out, func(a, b flagGroup) int {
		return strings.Compare(a.names[len(a.names)-1], b.names[len(b.names)-1])
	})
	return out
}

// alias registers the flag name again under more names, on the same
// Value: llama-server spells its flags short and long (-c, --ctx-size),
// and the help lists them as one flag.
func (f *flags) alias(name string, more ...string) {
	fl := f.Lookup(name)
	for _, n := range more {
		f.Var(fl.Value, n, fl.Usage)
	}
}

// sameValue reports whether two flags were registered on one variable.
// Values of pointer type compare by address; others (refused flags) are
// never grouped unless equal and comparable.
func sameValue(a, b flag.Value) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// spelled writes a group's names as llama.cpp's help does: the short
// spellings (-c, -ngl, -ncmoe) with one dash, the words (--ctx-size,
// --gpu-layers) with two.
func (g flagGroup) spelled() string {
	var parts []string
	for i, n := range g.names {
		dash := "--"
		// llama.cpp's short spellings (-c, -np, -ctxcp) come first; its
		// long ones without a hyphen (--embedding) keep two dashes.
		if len(g.names) > 1 && i < len(g.names)-1 && !strings.Contains(n, "-") && len(n) <= 5 {
			dash = "-"
		}
		parts = append(parts, dash+n)
	}
	return strings.Join(parts, ", ")
}

// printFlags writes one entry per flag: its names, its argument, what it
// does and its default when the description does not already say it.
func (f *flags) printFlags(w io.Writer) {
	for _, g := range f.groups() {
		arg, usage := flag.UnquoteUsage(g.flag)
		switch arg {
		case "int", "int64":
			arg = "N"
		case "string", "value":
			arg = "VALUE"
		case "float":
			arg = "X"
		}
		head := "  " + g.spelled()
		if arg != "" {
			head += " " + arg
		}
		fmt.Fprintln(w, head)
		def := g.flag.DefValue
		if def != "" && def != "0" && def != "false" && !strings.Contains(strings.ToLower(usage), "default") {
			usage += " (default " + def + ")"
		}
		fmt.Fprintln(w, wrap(usage, "      ", "      ", textWidth))
	}
}

var (
	invalidValueRE = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for flag -([^:]+): (.*)$`)
	undefinedRE    = regexp.MustCompile(`^flag provided but not defined: -+(.+)$`)
	needsArgRE     = regexp.MustCompile(`^flag needs an argument: -+(.+)$`)
)

// parseError rewrites the flag package's messages to name the flag as it
// is spelled and say what it takes.
func (f *flags) parseError(err error) error {
	msg := err.Error()
	if m := invalidValueRE.FindStringSubmatch(msg); m != nil {
		why := m[3]
		if why == "parse error" || why == "value out of range" {
			why = "not " + f.takes(m[2])
		}
		return usagef("%s %q: %s", f.spellName(m[2]), m[1], why)
	}
	if m := undefinedRE.FindStringSubmatch(msg); m != nil {
		name := strings.TrimPrefix(m[1], "-")
		var names []string
		f.VisitAll(func(fl *flag.Flag) { names = append(names, fl.Name) })
		if s := suggest.Closest(name, names); s != "" {
			return usagef("unknown flag -%s (did you mean %s? the flags are listed by 'headroom %s --help')", name, f.spellName(s), f.Name())
		}
		return usagef("unknown flag -%s (the flags are listed by 'headroom %s --help')", name, f.Name())
	}
	if m := needsArgRE.FindStringSubmatch(msg); m != nil {
		return usagef("%s needs a value: %s", f.spellName(m[1]), f.takes(m[1]))
	}
	return usageError{msg}
}

// spellName is a flag's name with all its spellings.
func (f *flags) spellName(name string) string {
	for _, g := range f.groups() {
		if slices.Contains(g.names, name) {
			return g.spelled()
		}
	}
	return "-" + name
}

// takes says what a flag's value must be.
func (f *flags) takes(name string) string {
	fl := f.Lookup(name)
	if fl == nil {
		return "a value"
	}
	arg, usage := flag.UnquoteUsage(fl)
	switch arg {
	case "int", "int64":
		return "a whole number (" + usage + ")"
	case "float":
		return "a number (" + usage + ")"
	case "":
		return "true or false"
	}
	return usage
}
