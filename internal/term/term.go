// Package term makes untrusted text safe to show on a terminal.
//
// A string from a GGUF header, a Hub listing, a server's error body or a
// machine file may hold escape sequences that clear the screen, recolour
// it or set the window title when printed as it is. Text escapes one field
// for a single line; Writer escapes a whole stream, so that a field a
// printer forgot still cannot reach the terminal raw.
//
// What is escaped: C0 controls (0x00-0x1f), DEL, C1 controls
// (U+0080-U+009F), the Unicode bidirectional controls (which reorder how
// the rest of a line is shown) and bytes that are not UTF-8. ASCII
// controls and invalid bytes are written \xNN; DEL, C1 and bidirectional
// controls \uNNNN, which is also how JSON writes them, so a JSON document
// passing through a Writer decodes to the same values.
package term

import (
	"fmt"
	"io"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Text returns s with every character escaped that could control a
// terminal or break a line apart: newline, tab and carriage return too,
// since a field is one line of a table or a message.
func Text(s string) string {
	i := cleanPrefix(s, false)
	if i == len(s) {
		return s
	}
	b := make([]byte, 0, len(s)+16)
	b = append(b, s[:i]...)
	b, _ = escape(b, s[i:], false, true)
	return string(b)
}

// cleanPrefix is the length of the prefix of s that needs no escaping.
// keepLines lets newline, tab and carriage return through.
func cleanPrefix(s string, keepLines bool) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		if c < 0x80 {
			if keepLines && (c == '\n' || c == '\t' || c == '\r') {
				i++
				continue
			}
			return i
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 || isControl(r) {
			return i
		}
		i += n
	}
	return len(s)
}

// isControl reports whether r is a non-ASCII character Text escapes.
func isControl(r rune) bool {
	return r >= 0x80 && r <= 0x9f || unicode.Is(unicode.Bidi_Control, r)
}

// escape appends s to b with its controls escaped. With final false, an
// incomplete UTF-8 sequence at the end of s is not consumed (it may be
// completed by the next write); the number of bytes consumed is returned.
func escape(b []byte, s string, keepLines, final bool) ([]byte, int) {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c >= 0x20 && c < 0x7f:
			b = append(b, c)
			i++
			continue
		case c == 0x7f:
			b = append(b, `\u007f`...)
			i++
			continue
		case c < 0x80:
			switch {
			case keepLines && (c == '\n' || c == '\t' || c == '\r'):
				b = append(b, c)
			case c == '\n':
				b = append(b, `\n`...)
			case c == '\t':
				b = append(b, `\t`...)
			case c == '\r':
				b = append(b, `\r`...)
			default:
				b = fmt.Appendf(b, `\x%02x`, c)
			}
			i++
			continue
		}
		if !final && !utf8.FullRuneInString(s[i:]) {
			return b, i
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			b = fmt.Appendf(b, `\x%02x`, c)
			n = 1
		case isControl(r):
			b = fmt.Appendf(b, `\u%04x`, r)
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return b, len(s)
}

// Writer escapes what is written through it as Text does, except that
// newline, tab and carriage return pass: the stream is a program's whole
// output, laid out in lines and columns, and a progress line redraws
// itself with a carriage return. It is safe for concurrent use.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
	// held is the start of a UTF-8 character whose remaining bytes have
	// not been written yet; in and out are scratch space, reused.
	held    []byte
	in, out []byte
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Unwrap returns the writer escaped text goes to, so that a caller can
// still ask whether it is a terminal.
func (w *Writer) Unwrap() io.Writer { return w.w }

// chunk is how much escaped text a Writer gathers before writing it on.
const chunk = 32 << 10

// Write escapes p and writes it on. It reports len(p) when every escaped
// byte was written: p's bytes were all consumed, the start of a character
// split between two writes held until the rest of it arrives.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	total := len(p)
	for len(p) > 0 {
		take := min(len(p), chunk)
		w.in = append(append(w.in[:0], w.held...), p[:take]...)
		p = p[take:]
		w.held = w.held[:0]
		s := string(w.in)
		if cleanPrefix(s, true) == len(s) {
			if _, err := w.w.Write(w.in); err != nil {
				return 0, err
			}
			continue
		}
		var n int
		w.out, n = escape(w.out[:0], s, true, false)
		w.held = append(w.held, s[n:]...)
		if _, err := w.w.Write(w.out); err != nil {
			return 0, err
		}
	}
	return total, nil
}

// Flush writes a character left incomplete by the last write, escaped
// byte by byte: nothing will complete it.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.held) == 0 {
		return nil
	}
	w.out, _ = escape(w.out[:0], string(w.held), true, true)
	w.held = w.held[:0]
	_, err := w.w.Write(w.out)
	return err
}
