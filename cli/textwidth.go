package cli

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// textWidth is the widest line fit, plan and recommend print by default:
// a terminal of 100 columns shows every line whole.
const textWidth = 100

// wrap breaks s into lines of at most width runes at spaces: the first
// line starts with first, the others with rest. A word longer than the
// room left stays whole on a line of its own.
func wrap(s, first, rest string, width int) string {
	var b strings.Builder
	line, n := first, utf8.RuneCountInString(first)
	empty := true
	for _, word := range strings.Fields(s) {
		wn := utf8.RuneCountInString(word)
		if !empty && n+1+wn > width {
			b.WriteString(line + "\n")
			line, n, empty = rest, utf8.RuneCountInString(rest), true
		}
		if !empty {
			line, n = line+" ", n+1
		}
		line, n, empty = line+word, n+wn, false
	}
	b.WriteString(line)
	return b.String()
}

// wrapCommand writes a command line within width columns, breaking it
// between arguments with a shell continuation so that it still runs when
// pasted; a flag stays on the line of its value.
func wrapCommand(args []string, width int) string {
	var words []string
	for i := 0; i < len(args); i++ {
		w := args[i]
		if strings.HasPrefix(w, "-") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			w += " " + args[i+1]
			i++
		}
		words = append(words, w)
	}
	var b strings.Builder
	line := ""
	for _, w := range words {
		switch {
		case line == "":
			line = w
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w)+2 > width:
			b.WriteString(line + " \\\n")
			line = "    " + w
		default:
			line += " " + w
		}
	}
	b.WriteString(line)
	return b.String()
}

// truncate shortens s to at most n runes, ending in an ellipsis where it
// cut; the full text is in the command's --json.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n || n < 1 {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// table aligns cells in columns two spaces apart, right-aligning the
// columns marked so (figures), and keeps lines that are no row (a note
// under a row) out of the alignment, which text/tabwriter cannot.
type table struct {
	right []bool
	rows  [][]string // nil cells: a note line, in notes
	notes []string
}

func (t *table) row(cells ...string) { t.rows = append(t.rows, cells); t.notes = append(t.notes, "") }

// note adds a line printed as it is after the last row.
func (t *table) note(line string) { t.rows = append(t.rows, nil); t.notes = append(t.notes, line) }

func (t *table) String() string {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for i, r := range t.rows {
		if r == nil {
			b.WriteString(t.notes[i] + "\n")
			continue
		}
		var line strings.Builder
		for j, c := range r {
			pad := strings.Repeat(" ", widths[j]-utf8.RuneCountInString(c))
			if j > 0 {
				line.WriteString("  ")
			}
			if j < len(t.right) && t.right[j] {
				line.WriteString(pad + c)
			} else {
				line.WriteString(c + pad)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " ") + "\n")
	}
	return b.String()
}

// gib1 writes a byte count in GiB with one decimal, the precision a person
// decides with: "18.4".
func gib1(n int64) string { return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) }

// roughSize writes a byte count for a person deciding: GiB with one
// decimal, or whole MiB below a tenth of a GiB, which one decimal would
// round to nothing.
func roughSize(n int64) string {
	if n < 1<<30/10 {
		return strconv.FormatInt((n+1<<20-1)>>20, 10) + " MiB"
	}
	return gib1(n) + " GiB"
}
