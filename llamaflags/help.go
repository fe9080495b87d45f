// Package llamaflags is llama.cpp's command line as the measured builds
// define it: every flag of each program's argument table (common/arg.cpp,
// read from the programs' own --help), its spellings, its environment
// variable, how many values it takes, the programs that accept it, and
// what headroom does with it: counts it, passes it through unchanged, or
// refuses it with the reason. fit, plan, serve, the API, --verify and the
// router presets all read and write llama.cpp's flags through it.
package llamaflags

import (
	"bufio"
	"fmt"
	"strings"
)

// Flag is one option of a llama.cpp program's argument table: every
// spelling it is given under (a negation such as --no-mmap among them),
// the environment variable that sets it, and how many values follow it.
type Flag struct {
	// Names are the spellings, dashes included, as --help lists them.
	Names []string `json:"names"`
	// Hint is the value's placeholder ("N", "TYPE", "[on|off|auto]");
	// empty for a flag that takes no value.
	Hint string `json:"hint,omitempty"`
	// Values is how many arguments follow the flag: 0, 1 or 2
	// (--control-vector-layer-range START END).
	Values int `json:"values"`
	// Env is the LLAMA_ARG_* (or other) variable that sets it; empty
	// where it has none.
	Env string `json:"env,omitempty"`
}

// Key is the flag's name in headroom's tables: its first long spelling.
func (f Flag) Key() string {
	for _, n := range f.Names {
		if strings.HasPrefix(n, "--") {
			return n
		}
	}
	return f.Names[0]
}

// helpColumn is where arg.cpp starts a flag's description; a header
// longer than helpColumn-3 puts the description on the next line.
const helpColumn = 40

// ParseHelp reads a llama.cpp program's --help: each line that starts
// with a dash at the first column (section rules aside) lists a flag's
// spellings and value, and the "(env: NAME)" in its description names its
// variable. An empty table, a spelling that does not start with a dash,
// or one listed twice is an error that says where.
func ParseHelp(text string) ([]Flag, error) {
	var out []Flag
	seen := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), " \r")
		switch {
		case strings.HasPrefix(line, "-----"):
			continue
		case strings.HasPrefix(line, "-"):
			header := line
			if len(line) > helpColumn && line[helpColumn-3:helpColumn] == "   " {
				header = line[:helpColumn]
			}
			f, err := parseHeader(strings.TrimSpace(header))
			if err != nil {
				return nil, fmt.Errorf("help line %d: %w", n, err)
			}
			for _, name := range f.Names {
				if at, dup := seen[name]; dup {
					return nil, fmt.Errorf("help line %d: %s is listed again (first at line %d)", n, name, at)
				}
				seen[name] = n
			}
			out = append(out, f)
		case len(out) > 0:
			if i := strings.Index(line, "(env: "); i >= 0 {
				if j := strings.Index(line[i:], ")"); j > 0 {
					out[len(out)-1].Env = line[i+len("(env: ") : i+j]
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading help: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("help lists no flags (want lines such as \"-c,    --ctx-size N\")")
	}
	return out, nil
}

// parseHeader reads "-c,    --ctx-size N": spellings separated by commas,
// the last one followed by the value's placeholder.
func parseHeader(h string) (Flag, error) {
	var f Flag
	parts := strings.Split(h, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		name, hint, _ := strings.Cut(p, " ")
		if i < len(parts)-1 && hint != "" {
			// A placeholder with a comma ("N0,N1,N2,...") is the
			// rest of the header.
			hint = strings.TrimSpace(hint + "," + strings.Join(parts[i+1:], ","))
			parts = parts[:i+1]
		}
		if !strings.HasPrefix(name, "-") || name == "-" || name == "--" {
			return f, fmt.Errorf("want a flag's spelling (-x or --name), found %q in %q", name, h)
		}
		f.Names = append(f.Names, name)
		if hint != "" {
			f.Hint = strings.TrimSpace(hint)
			break
		}
	}
	f.Values = valueCount(f.Hint)
	return f, nil
}

// valueCount is how many arguments a placeholder stands for: none, one,
// or two where it is two bare words ("START END", arg.cpp's second
// value hint).
func valueCount(hint string) int {
	switch w := strings.Fields(hint); {
	case len(w) == 0:
		return 0
	case len(w) == 2 && upperWord(w[0]) && upperWord(w[1]):
		return 2
	}
	return 1
}

func upperWord(s string) bool {
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r == '_' || r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}
