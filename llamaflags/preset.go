package llamaflags

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// A presets file is llama-server's router configuration (--models-preset,
// common/preset.cpp): an INI file whose sections are models and whose
// keys are flags without their dashes (c = 8192, no-mmap = true), with
// [*] applying to every model. headroom reads the same file for
// serve-api's per-model settings, so one file serves both.

// PresetKey is one key = value line of a presets file.
type PresetKey struct {
	Key, Value string
	// Line is where it is, from 1.
	Line int
}

// PresetSection is one [name] section.
type PresetSection struct {
	Name string
	Line int
	Keys []PresetKey
}

// Get returns the value of the first of keys the section sets, and
// whether one is set.
func (s *PresetSection) Get(keys ...string) (PresetKey, bool) {
	for _, kv := range s.Keys {
		if slices.Contains(keys, kv.Key) {
			return kv, true
		}
	}
	return PresetKey{}, false
}

// Presets is a presets file read: the [*] section (nil without one) and
// the models' sections in file order.
type Presets struct {
	Global *PresetSection
	Models []PresetSection
}

// PresetError is a line of a presets file that cannot be read, or a key
// that cannot be used.
type PresetError struct {
	File string
	Line int
	Msg  string
}

func (e *PresetError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// maxPresetsFile bounds a presets file: thousands of models' settings fit
// in far less.
const maxPresetsFile = 4 << 20

// ParsePresets reads a presets file as llama.cpp's parser does (comments
// after ; or #, a value ending at a comment or the line's end, keys of
// [A-Za-z_][A-Za-z0-9_.-]*), but stricter where llama.cpp silently
// forgets: a key before any section, a section given twice (llama.cpp
// empties the first) and a key given twice in a section are errors, each
// with its line. name is the file's name, for errors. The version key is
// skipped, as llama.cpp skips it.
func ParsePresets(name string, data []byte) (*Presets, error) {
	if len(data) > maxPresetsFile {
		return nil, &PresetError{File: name, Msg: fmt.Sprintf("%d bytes, more than the %d a presets file may have", len(data), maxPresetsFile)}
	}
	p := &Presets{}
	var cur *PresetSection
	seen := map[string]int{}
	fail := func(line int, format string, args ...any) error {
		return &PresetError{File: name, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	lines := bytes.Split(bytes.ReplaceAll(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n")), []byte("\n"))
	for i, raw := range lines {
		n := i + 1
		line := strings.TrimLeft(string(raw), " \t")
		switch {
		case line == "" || line[0] == ';' || line[0] == '#':
			continue
		case line[0] == '[':
			end := strings.IndexByte(line, ']')
			if end < 0 {
				return nil, fail(n, "a section header without its closing ]: %q", clip(line))
			}
			if rest := strings.TrimSpace(line[end+1:]); rest != "" && rest[0] != ';' && rest[0] != '#' {
				return nil, fail(n, "text after the section header: %q", clip(rest))
			}
			sec := strings.Trim(line[1:end], " \t")
			if sec == "" {
				return nil, fail(n, "an empty section name")
			}
			if at, ok := seen[sec]; ok {
				return nil, fail(n, "section [%s] given again (first at line %d); llama-server would keep only this one", sec, at)
			}
			seen[sec] = n
			s := PresetSection{Name: sec, Line: n}
			if sec == "*" {
				p.Global = &s
				cur = p.Global
				continue
			}
			p.Models = append(p.Models, s)
			cur = &p.Models[len(p.Models)-1]
		default:
			kv, err := presetKey(line, n)
			if err != nil {
				return nil, fail(n, "%v", err)
			}
			if kv.Key == "version" {
				continue
			}
			if cur == nil {
				return nil, fail(n, "%s = %s comes before any [section]; name the model it is for, or put it under [*] for every model", kv.Key, clip(kv.Value))
			}
			if prev, ok := cur.Get(kv.Key); ok {
				return nil, fail(n, "%s given again in [%s] (first at line %d)", kv.Key, cur.Name, prev.Line)
			}
			cur.Keys = append(cur.Keys, kv)
		}
	}
	return p, nil
}

// presetKey reads one key = value line, its leading blanks gone.
func presetKey(line string, n int) (PresetKey, error) {
	k := 0
	for k < len(line) && isKeyByte(line[k], k == 0) {
		k++
	}
	if k == 0 {
		return PresetKey{}, fmt.Errorf("want a [section], a key = value line or a comment, not %q", clip(line))
	}
	key := line[:k]
	rest := strings.TrimLeft(line[k:], " \t")
	if rest == "" || rest[0] != '=' {
		return PresetKey{}, fmt.Errorf("key %s is not followed by =", key)
	}
	value := strings.TrimLeft(rest[1:], " \t")
	// The value ends where a comment starts, blanks before it dropped.
	if c := strings.IndexAny(value, ";#"); c >= 0 {
		value = value[:c]
	}
	return PresetKey{Key: key, Value: strings.TrimRight(value, " \t"), Line: n}, nil
}

func isKeyByte(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		return true
	case first:
		return false
	}
	return c >= '0' && c <= '9' || c == '.' || c == '-'
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// PresetWords turns a key of a presets file into the command-line words
// llama.cpp reads for it, as common/preset.cpp maps keys to options: the
// key is any spelling of a flag without its dashes, or its environment
// variable; a flag without a value takes true or false (1/0, on/off,
// enabled/disabled), a negated spelling reversing it. It returns nil words for a
// false flag that has no negation (nothing to say). The entry is nil for
// a key no flag of the table has.
func (t *Table) PresetWords(kv PresetKey) ([]string, *Entry, error) {
	e := t.Lookup("--" + kv.Key)
	if e == nil {
		for _, x := range t.entries {
			if x.Env != "" && x.Env == kv.Key {
				e = x
				break
			}
		}
	}
	if e == nil {
		return nil, nil, nil
	}
	switch e.Values {
	case 0:
		on, ok := PresetBool(kv.Value)
		if !ok {
			return nil, e, fmt.Errorf("%s = %q: want true or false", kv.Key, kv.Value)
		}
		neg := negations(e)
		if slices.Contains(neg, e.Spelling("--"+kv.Key)) {
			on = !on
		}
		for _, n := range e.Names {
			if slices.Contains(neg, n) != on {
				return []string{n}, e, nil
			}
		}
		return nil, e, nil
	case 1:
		if kv.Value == "" {
			return nil, e, fmt.Errorf("%s has no value; it takes %s", kv.Key, e.Hint)
		}
		return []string{e.Key(), kv.Value}, e, nil
	}
	vals := strings.Fields(kv.Value)
	if len(vals) != e.Values {
		return nil, e, fmt.Errorf("%s = %q: it takes %d values, space-separated", kv.Key, kv.Value, e.Values)
	}
	return append([]string{e.Key()}, vals...), e, nil
}

// negations are the spellings of a flag that negate it, as --help lists
// them after the positive ones: "-kvo, --kv-offload, -nkvo,
// --no-kv-offload" has -nkvo and --no-kv-offload. A flag whose first long
// spelling is already a --no- one (--no-warmup) has no negation: it is
// its own sense.
func negations(e *Entry) []string {
	lastPos := -1
	for i, n := range e.Names {
		if !strings.HasPrefix(n, "--") {
			continue
		}
		if strings.HasPrefix(n, "--no-") {
			if lastPos < 0 {
				return nil
			}
			return e.Names[lastPos+1:]
		}
		lastPos = i
	}
	return nil
}

// PresetBool reads a presets file's boolean as common_arg_utils does
// (its words only, in lower case): on, and whether v is one.
func PresetBool(v string) (on, ok bool) {
	switch v {
	case "1", "true", "on", "enabled":
		return true, true
	case "0", "false", "off", "disabled":
		return false, true
	}
	return false, false
}
