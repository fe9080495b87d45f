package llamaflags

import (
	"fmt"
	"strings"
)

// Doc writes docs/llama-flags.md: every flag of each held build's
// tables with its spellings, the programs that take it and what headroom
// does with it, grouped by use.
func Doc() (string, error) {
	var b strings.Builder
	b.WriteString("# llama.cpp's flags\n\n")
	b.WriteString("Generated from `llamaflags` (`go test ./llamaflags -run TestDoc -update-doc`); do not edit.\n\n")
	b.WriteString("headroom reads llama.cpp's command line through one table per measured build: every flag of `llama-server`, `llama-cli`, " +
		"`llama-completion` and `llama-fit-params` as each program's own `--help` lists it (held in `llamaflags/help/BUILD/`), " +
		"classified. A flag is **modeled** (fit, plan and serve take it under llama.cpp's spellings and count what it changes), " +
		"names the **model**, is **passed through** (it changes nothing headroom counts and reaches llama-server unchanged; " +
		"`headroom serve` starts llama-server with it, fit and plan print it in the command line) or is **refused** with the reason " +
		"(it changes memory in a way headroom does not count yet, or makes llama-server do something other than serve one model). " +
		"A build that adds a flag fails `TestEveryFlagClassified` until the flag is classified here. `--verify` gives " +
		"`llama-fit-params` only the flags its own table takes.\n")
	bs := Builds()
	for i := len(bs) - 1; i >= 0; i-- {
		t, err := Load(bs[i])
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "\n## Build %s\n\n%d flags.\n", t.Build, len(t.Entries()))
		for _, use := range []Use{Modeled, Model, Refused, PassThrough} {
			fmt.Fprintf(&b, "\n### %s\n\n| flag | programs | env | why |\n|---|---|---|---|\n", use)
			for _, e := range t.Entries() {
				if e.Use != use {
					continue
				}
				fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", strings.Join(e.Names, "`, `"), shortPrograms(e.Programs), code(e.Env), e.Why)
			}
		}
	}
	return b.String(), nil
}

func shortPrograms(ps []Program) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strings.TrimPrefix(string(p), "llama-")
	}
	return strings.Join(s, ", ")
}

func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + s + "`"
}
