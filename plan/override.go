package plan

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Override is one tensor buffer-type override (-ot PATTERN=BUFT): every
// weight whose name the pattern matches (anywhere in the name, as
// std::regex_search does) is loaded into buffer type Buft, a device's own
// buffer type as llama.cpp names it (CPU, CUDA0, Vulkan0, MTL0, ...). The
// first matching override wins; --n-cpu-moe's come after the user's.
type Override struct {
	Pattern string
	Buft    string
	re      *regexp.Regexp
}

// ParseOverrides reads -ot values: each a comma-separated list of
// PATTERN=BUFT. Patterns are regular expressions; Go's syntax (RE2) reads
// the patterns people write for llama.cpp (ECMAScript) the same way, and
// one it cannot read is an error rather than a guess.
func ParseOverrides(values ...string) ([]Override, error) {
	var out []Override
	for _, v := range values {
		for _, item := range strings.Split(v, ",") {
			pattern, buft, ok := strings.Cut(item, "=")
			if !ok || pattern == "" || buft == "" {
				return nil, fmt.Errorf("-ot %q: want PATTERN=BUFFER_TYPE, e.g. 'blk\\.[0-9]+\\.ffn_.*_exps=CPU'", item)
			}
			re, err := regexp.Compile(pattern)
			if err != nil {
				return nil, fmt.Errorf("-ot %q: the pattern is not a regular expression headroom can read: %w", item, err)
			}
			out = append(out, Override{Pattern: pattern, Buft: buft, re: re})
		}
	}
	return out, nil
}

// String is the override as -ot takes it.
func (o Override) String() string { return o.Pattern + "=" + o.Buft }

// Matches reports whether the override applies to the tensor name.
func (o Override) Matches(name string) bool {
	if o.re == nil {
		// An Override built by hand rather than parsed; patterns that do
		// not compile were refused by ParseOverrides.
		re, err := regexp.Compile(o.Pattern)
		if err != nil {
			return false
		}
		return re.MatchString(name)
	}
	return o.re.MatchString(name)
}

// MarshalJSON writes the override as -ot spells it.
func (o Override) MarshalJSON() ([]byte, error) { return json.Marshal(o.String()) }

// UnmarshalJSON reads an override as -ot spells it.
func (o *Override) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	parsed, err := ParseOverrides(s)
	if err != nil {
		return err
	}
	if len(parsed) != 1 {
		return fmt.Errorf("override %q: want one PATTERN=BUFFER_TYPE", s)
	}
	*o = parsed[0]
	return nil
}

// overrideFlag renders overrides as one -ot value.
func overrideFlag(os []Override) string {
	parts := make([]string, len(os))
	for i, o := range os {
		parts[i] = o.String()
	}
	return strings.Join(parts, ",")
}

// checkOverrides refuses an override naming a buffer type no device has:
// llama.cpp accepts only the devices' own buffer types there.
func checkOverrides(os []Override, cpu Device, gpus []Device) error {
	names := []string{cpu.Name}
	for _, g := range gpus {
		names = append(names, g.bufferType())
	}
	for _, o := range os {
		if !slices.Contains(names, o.Buft) {
			return fmt.Errorf("-ot %s: no device has buffer type %q (available: %s)", o, o.Buft, strings.Join(names, ", "))
		}
	}
	return nil
}
