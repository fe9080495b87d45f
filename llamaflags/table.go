package llamaflags

import (
	"embed"

	"fmt"
	"github.com/headroom-llm/headroom/builds"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
)

// The programs' own --help of each measured build, as the build printed
// it: the argument tables the codec is held to. Adding a build is adding
// its folder (see TestEveryFlagClassified).
//
//go:embed help
var helpFS embed.FS

// Program is a llama.cpp program with an argument table of its own.
type Program string

// The programs whose tables headroom reads. llama-bench parses its own
// flags (comma lists of values to sweep) and is not among them.
const (
	Server     Program = "llama-server"
	CLI        Program = "llama-cli"
	Completion Program = "llama-completion"
	FitParams  Program = "llama-fit-params"
)

// Programs are the programs of every table, the server first.
func Programs() []Program { return []Program{Server, CLI, Completion, FitParams} }

// Entry is a flag of a build with the programs that accept it and what
// headroom does with it.
type Entry struct {
	Flag
	// Programs that list the flag in their --help.
	Programs []Program `json:"programs"`
	Class
}

// Accepts reports whether program p takes the flag.
func (e *Entry) Accepts(p Program) bool { return slices.Contains(e.Programs, p) }

// Table is one build's argument tables, merged: each flag once, with the
// programs that take it.
type Table struct {
	// Build is the commit the tables were read from.
	Build   string
	entries []*Entry
	byName  map[string]*Entry
}

// Builds lists the builds whose tables are held, oldest first by their
// build numbers (builds.Measured); a held folder that is not a measured
// build is left out (TestHeldBuildsMeasured).
func Builds() []string {
	ds, err := helpFS.ReadDir("help")
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range builds.Measured() {
		for _, d := range ds {
			if d.IsDir() && d.Name() == m.Commit {
				out = append(out, m.Commit)
			}
		}
	}
	return out
}

// For returns the table of build (a commit), or of the newest held build
// where build is not held, as headroom's accounting takes the newest
// measured build's rules for one it does not know; "" is the newest.
func For(build string) (*Table, error) {
	bs := Builds()
	if len(bs) == 0 {
		return nil, fmt.Errorf("no argument tables are embedded")
	}
	if !slices.Contains(bs, build) {
		build = bs[len(bs)-1]
	}
	return Load(build)
}

// Union is every held build's table in one, for reading a command line
// whose build is not known yet: a flag any measured build has is known,
// with the programs and class of the newest build that has it (de3ff81
// dropped --no-mmap, which 80fb11a's table still gives).
func Union() (*Table, error) { return union() }

// union reads the held tables once per process: they are the program's
// own files and never change, and every command line and every
// projection reads them (parsing all of them allocates about 2.5 MB).
// The tables are not changed once made.
var union = sync.OnceValues(makeUnion)

func makeUnion() (*Table, error) {
	bs := Builds()
	if len(bs) == 0 {
		return nil, fmt.Errorf("no argument tables are embedded")
	}
	u := &Table{Build: strings.Join(bs, "+"), byName: map[string]*Entry{}}
	for i := len(bs) - 1; i >= 0; i-- {
		t, err := Load(bs[i])
		if err != nil {
			return nil, err
		}
		for _, e := range t.entries {
			known := false
			for _, n := range e.Names {
				known = known || u.byName[n] != nil
			}
			if known {
				continue
			}
			u.entries = append(u.entries, e)
			for _, n := range e.Names {
				u.byName[n] = e
			}
		}
	}
	return u, nil
}

// Load reads and classifies the tables of one held build. A flag that
// the classification does not know is an error: no flag of a measured
// build goes unclassified.
func Load(build string) (*Table, error) {
	t, ok := loaded()[build]
	if !ok {
		return parse(build)
	}
	return t.t, t.err
}

// loadResult is one build's table, or why it could not be read.
type loadResult struct {
	t   *Table
	err error
}

// loaded is every held build's table, read once per process (see union).
var loaded = sync.OnceValue(func() map[string]loadResult {
	m := map[string]loadResult{}
	for _, b := range Builds() {
		t, err := parse(b)
		m[b] = loadResult{t, err}
	}
	return m
})

// parse reads and classifies one build's tables.
func parse(build string) (*Table, error) {
	t := &Table{Build: build, byName: map[string]*Entry{}}
	classes := classes()
	for _, p := range Programs() {
		data, err := helpFS.ReadFile(path.Join("help", build, string(p)+".txt"))
		if err != nil {
			return nil, fmt.Errorf("build %s: no table for %s: %w", build, p, err)
		}
		flags, err := ParseHelp(string(data))
		if err != nil {
			return nil, fmt.Errorf("build %s, %s --help: %w", build, p, err)
		}
		for _, f := range flags {
			if err := t.add(f, p, classes); err != nil {
				return nil, fmt.Errorf("build %s, %s: %w", build, p, err)
			}
		}
	}
	return t, nil
}

// add merges one program's flag into the table: a flag the table has
// (by its key) gains the program and any spelling it lacked; a spelling
// that names another flag is an error.
func (t *Table) add(f Flag, p Program, classes map[string]Class) error {
	var e *Entry
	for _, n := range f.Names {
		if o := t.byName[n]; o != nil && o.Key() != f.Key() {
			return fmt.Errorf("%s is %s here and %s in another program", n, f.Key(), o.Key())
		} else if o != nil {
			e = o
		}
	}
	if e == nil {
		c, ok := classes[f.Key()]
		if !ok {
			return fmt.Errorf("%s is not classified (llamaflags/classes.go)", strings.Join(f.Names, ", "))
		}
		e = &Entry{Flag: f, Class: c}
		e.Names = nil // the loop below lists them
		t.entries = append(t.entries, e)
	}
	if !e.Accepts(p) {
		e.Programs = append(e.Programs, p)
	}
	for _, n := range f.Names {
		if t.byName[n] == nil {
			t.byName[n] = e
			e.Names = append(e.Names, n)
		}
	}
	return nil
}

// Entries lists every flag, in the order the programs' help lists them.
func (t *Table) Entries() []*Entry { return t.entries }

// Lookup finds a flag as typed: its exact spelling, else the same name
// with the other number of dashes (Go's flag package and headroom take
// -ctx-size for --ctx-size; llama.cpp does not, so the entry says which
// spelling it has). nil when the build has no such flag.
func (t *Table) Lookup(typed string) *Entry {
	name, _, _ := strings.Cut(typed, "=")
	if e := t.byName[name]; e != nil {
		return e
	}
	bare := strings.TrimLeft(name, "-")
	if bare == "" {
		return nil
	}
	for _, alt := range []string{"-" + bare, "--" + bare} {
		if e := t.byName[alt]; e != nil {
			return e
		}
	}
	return nil
}

// Names lists every spelling, sorted, for "did you mean".
func (t *Table) Names() []string {
	out := make([]string, 0, len(t.byName))
	for n := range t.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Spelling is the spelling of e that llama.cpp takes for a name typed
// with any number of dashes: the typed one where the build has it.
func (e *Entry) Spelling(typed string) string {
	name, _, _ := strings.Cut(typed, "=")
	if slices.Contains(e.Names, name) {
		return name
	}
	bare := strings.TrimLeft(name, "-")
	for _, n := range e.Names {
		if strings.TrimLeft(n, "-") == bare {
			return n
		}
	}
	return e.Names[0]
}
