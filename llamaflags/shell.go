package llamaflags

import "fmt"

// ShellWords splits a command line into words as a POSIX shell would for
// the forms a pasted command uses: blanks separate words, single quotes
// keep everything, double quotes keep all but a backslash before " \ $ or
// `, and a backslash outside quotes keeps the next character. Expansions
// ($VAR, globs) are not made. An unclosed quote is an error that says
// where it opened.
func ShellWords(s string) ([]string, error) {
	var words []string
	var cur []rune
	inWord := false
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words, cur, inWord = append(words, string(cur)), nil, false
			}
		case r == '\\' && i+1 < len(rs) && rs[i+1] == '\n':
			i++ // a line continued
		case r == '\\':
			inWord = true
			if i+1 < len(rs) {
				i++
				cur = append(cur, rs[i])
			}
		case r == '\'' || r == '"':
			inWord = true
			open := i
			for i++; i < len(rs) && rs[i] != r; i++ {
				if r == '"' && rs[i] == '\\' && i+1 < len(rs) && (rs[i+1] == '"' || rs[i+1] == '\\' || rs[i+1] == '$' || rs[i+1] == '`') {
					i++
				}
				cur = append(cur, rs[i])
			}
			if i >= len(rs) {
				return nil, fmt.Errorf("the quote %c at character %d is not closed", r, open+1)
			}
		default:
			inWord = true
			cur = append(cur, r)
		}
	}
	if inWord {
		words = append(words, string(cur))
	}
	return words, nil
}
