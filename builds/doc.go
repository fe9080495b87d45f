package builds

import (
	"fmt"
	"reflect"
	"strings"
)

// Markdown is docs/builds.md: the builds headroom measured and the table
// of rules by build number, as the code has them.
func Markdown() string {
	var b strings.Builder
	b.WriteString("# llama.cpp builds and their rules\n\n")
	b.WriteString("Generated from `builds/` by `go test ./builds -update-doc`; a test keeps it in step.\n\n")
	b.WriteString("headroom plans for one llama.cpp build at a time. Where builds differ in what they allocate, the difference is a rule that changed at a known build number; a build that prints its number (`llama-server --version`) is planned under the rules that number implies, and said to be an estimate unless headroom measured that build.\n\n")
	b.WriteString("## Measured builds\n\n")
	b.WriteString("| commit | rules of | source | measured | default |\n|---|---|---|---|---|\n")
	newest := Newest()
	for _, m := range Measured() {
		def := ""
		if m.Commit == newest.Commit {
			def = "yes"
		}
		fmt.Fprintf(&b, "| %s | b%d (%s) | %s | %s | %s |\n", m.Commit, m.Number, m.Release, m.Source, m.Measured, def)
	}
	b.WriteString("\n## Rules by build\n\n")
	fmt.Fprintf(&b, "Builds before b%d are outside the table. Where a first build is only bounded, builds inside the bounds get the newer rule and are told so.\n\n", Oldest)
	b.WriteString("| from build | until | field | change |\n|---|---|---|---|\n")
	for _, c := range changes() {
		until := ""
		if c.Until > 0 {
			until = fmt.Sprintf("b%d", c.Until)
		}
		fmt.Fprintf(&b, "| b%d | %s | `%s` | %s |\n", c.From, until, fieldName(c), c.What)
	}
	b.WriteString("\n## Adding a build or a rule\n\n")
	b.WriteString("A rule that changed at one build is a field of `builds.Rules` (true is the newer behaviour) and a row of `changes` in `builds/table.go`, plus the code that reads it. A measured build is a row of `Measured` in `builds/measured.go`, with the release whose rules it has; the golden cases it loaded hold the table to it.\n")
	return b.String()
}

// fieldName is the name of the Rules field a change turns on.
func fieldName(c change) string {
	var r Rules
	p := c.Rule(&r)
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Bool && f.Addr().Interface().(*bool) == p {
			return v.Type().Field(i).Name
		}
	}
	return "?"
}
