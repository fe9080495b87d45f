package term

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// attack clears the screen, colours it red and sets the window title.
const attack = "\x1b[2J\x1b[31mPWNED\x1b]0;title-hijack\x07"

func TestText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Qwen3 8B", "Qwen3 8B"},
		{"", ""},
		{"naïve 模型 🙂", "naïve 模型 🙂"},
		{attack, `\x1b[2J\x1b[31mPWNED\x1b]0;title-hijack\x07`},
		{"a\nb\tc\rd", `a\nb\tc\rd`},
		{"nul\x00", `nul\x00`},
		{"del\x7f", `del\u007f`},
		{"csi\u009b2J", `csi\u009b2J`},
		{"bad\xff\xfe", `bad\xff\xfe`},
		{"cut\xe6\xa8", `cut\xe6\xa8`},
		{"rlo\u202egpj.exe", `rlo\u202egpj.exe`},
		{"lri\u2066x\u2069", `lri\u2066x\u2069`},
	} {
		if got := Text(tc.in); got != tc.want {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestWriterKeepsLines(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	in := "model\t" + attack + "\nnext line\r\n"
	if n, err := w.Write([]byte(in)); n != len(in) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(in))
	}
	want := "model\t" + `\x1b[2J\x1b[31mPWNED\x1b]0;title-hijack\x07` + "\nnext line\r\n"
	if b.String() != want {
		t.Errorf("wrote %q, want %q", b.String(), want)
	}
}

// TestWriterSplits writes the same text cut at every place, including
// inside multi-byte characters: the output must not depend on where the
// writes fell.
func TestWriterSplits(t *testing.T) {
	in := "ok 模型\u009b🙂\xff" + attack + "é\n"
	var whole bytes.Buffer
	ww := NewWriter(&whole)
	ww.Write([]byte(in))
	ww.Flush()
	for cut := 0; cut <= len(in); cut++ {
		var b bytes.Buffer
		w := NewWriter(&b)
		w.Write([]byte(in[:cut]))
		w.Write([]byte(in[cut:]))
		w.Flush()
		if b.String() != whole.String() {
			t.Errorf("cut at %d: %q, want %q", cut, b.String(), whole.String())
		}
	}
	if strings.ContainsAny(whole.String(), "\x1b\x07\u009b") {
		t.Errorf("raw control in %q", whole.String())
	}
}

func TestWriterFlushesIncomplete(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	w.Write([]byte("end\xe6\xa8"))
	if b.String() != "end" {
		t.Errorf("before Flush: %q, want the incomplete character held", b.String())
	}
	w.Flush()
	if b.String() != `end\xe6\xa8` {
		t.Errorf("after Flush: %q", b.String())
	}
}

// TestWriterKeepsJSON: JSON passing through a Writer decodes to the same
// strings, so --json output stays exact behind it.
func TestWriterKeepsJSON(t *testing.T) {
	values := []string{attack, "del\x7f", "c1\u0085\u009b", "rlo\u202e", "tab\tnl\n", "模型"}
	raw, err := json.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	w := NewWriter(&b)
	w.Write(raw)
	w.Flush()
	var got []string
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("escaped JSON %q does not parse: %v", b.String(), err)
	}
	for i := range values {
		if got[i] != values[i] {
			t.Errorf("value %d: %q, want %q", i, got[i], values[i])
		}
	}
	if bytes.ContainsAny(b.Bytes(), "\x1b\x07\x7f\u009b\u202e") {
		t.Errorf("raw control in %q", b.String())
	}
}

// TestWriterLarge passes a clean 8 MiB write through in chunks, and an
// escaped one with the same result as Text.
func TestWriterLarge(t *testing.T) {
	clean := strings.Repeat("abcdefgh模型\n", 1<<19)
	var b bytes.Buffer
	w := NewWriter(&b)
	w.Write([]byte(clean))
	w.Flush()
	if b.String() != clean {
		t.Error("clean text changed")
	}
	dirty := strings.Repeat("ab\x1b模", 1<<18)
	b.Reset()
	w.Write([]byte(dirty))
	w.Flush()
	if b.String() != Text(dirty) {
		t.Error("a large write is escaped differently from Text")
	}
}

// unsafeAt reports the first byte offset of s a terminal could act on, given
// the controls allowed, or -1.
func unsafeAt(s, allowed string) int {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(s[i:]); n <= 1 {
				return i
			}
		case r < 0x20 && !strings.ContainsRune(allowed, r), r == 0x7f, isControl(r):
			return i
		}
	}
	return -1
}

func FuzzWriter(f *testing.F) {
	f.Add([]byte(attack), 3)
	f.Add([]byte("模型\xff\u009b\u202e\n"), 2)
	f.Fuzz(func(t *testing.T, in []byte, cut int) {
		if i := unsafeAt(Text(string(in)), ""); i >= 0 {
			t.Fatalf("Text(%q) = %q: unsafe at %d", in, Text(string(in)), i)
		}
		var whole, split bytes.Buffer
		w := NewWriter(&whole)
		w.Write(in)
		w.Flush()
		if i := unsafeAt(whole.String(), "\n\t\r"); i >= 0 {
			t.Fatalf("Writer wrote %q for %q: unsafe at %d", whole.String(), in, i)
		}
		if cut < 0 || cut > len(in) {
			cut = len(in) / 2
		}
		s := NewWriter(&split)
		s.Write(in[:cut])
		s.Write(in[cut:])
		s.Flush()
		if split.String() != whole.String() {
			t.Fatalf("split at %d: %q, whole: %q", cut, split.String(), whole.String())
		}
	})
}
