package cli

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestWrap(t *testing.T) {
	for _, tc := range []struct {
		s, first, rest string
		width          int
		want           string
	}{
		{"a b c", "", "", 10, "a b c"},
		{"one two three four", "", "  ", 9, "one two\n  three\n  four"},
		{"verdict words here", "label    ", "           ", 20, "label    verdict\n           words\n           here"},
		{"averyveryverylongword x", "", "", 5, "averyveryverylongword\nx"},
		{"", "engine: ", "", 10, "engine: "},
		{"é é é é", "", "", 3, "é é\né é"},
	} {
		if got := wrap(tc.s, tc.first, tc.rest, tc.width); got != tc.want {
			t.Errorf("wrap(%q, %d) = %q, want %q", tc.s, tc.width, got, tc.want)
		}
	}
}

func TestWrapCommand(t *testing.T) {
	args := strings.Fields("llama-server -m /models/a.gguf -c 8192 -np 2 -ngl all --fit off -kvu")
	if got, want := wrapCommand(args, 100), strings.Join(args, " "); got != want {
		t.Errorf("short command changed: %q", got)
	}
	got := wrapCommand(args, 32)
	want := "llama-server -m /models/a.gguf \\\n    -c 8192 -np 2 -ngl all \\\n    --fit off -kvu"
	if got != want {
		t.Errorf("wrapCommand at 32 =\n%s\nwant\n%s", got, want)
	}
	// The shell reads the continuation back as the same arguments.
	if back := strings.Fields(strings.ReplaceAll(got, "\\\n", "")); strings.Join(back, " ") != strings.Join(args, " ") {
		t.Errorf("continuations do not join back: %q", back)
	}
}

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"qwen3-32b", 20, "qwen3-32b"},
		{"mistral-small-24b-instruct-2501", 10, "mistral-s…"},
		{"abc", 3, "abc"},
		{"abcd", 3, "ab…"},
	} {
		if got := truncate(tc.s, tc.n); got != tc.want || utf8.RuneCountInString(got) > max(tc.n, utf8.RuneCountInString(tc.s)) {
			t.Errorf("truncate(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestTable(t *testing.T) {
	tb := &table{right: []bool{false, true}}
	tb.row("model", "memory")
	tb.row("a-long-model-name", "4.1")
	tb.note("     does not fit: ram short by 4.0 GiB, a note longer than any column")
	tb.row("b", "123.4")
	want := "model              memory\n" +
		"a-long-model-name     4.1\n" +
		"     does not fit: ram short by 4.0 GiB, a note longer than any column\n" +
		"b                   123.4\n"
	if got := tb.String(); got != want {
		t.Errorf("table =\n%s\nwant\n%s", got, want)
	}
}

func TestRoughSize(t *testing.T) {
	for n, want := range map[int64]string{50 << 20: "50 MiB", 1: "1 MiB", 1 << 30: "1.0 GiB", 47 << 29: "23.5 GiB"} {
		if got := roughSize(n); got != want {
			t.Errorf("roughSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// FuzzWrap: every word comes back in order, and no line is wider than the
// width unless it holds one word alone.
func FuzzWrap(f *testing.F) {
	f.Add("fits: a model needs 18.0 of 24.0 GiB on gpu0 (CUDA0), 6.0 GiB spare", 20)
	f.Add("é  x\ty\nz", 1)
	f.Fuzz(func(t *testing.T, s string, width int) {
		if width < 1 || width > 200 || !utf8.ValidString(s) {
			return
		}
		got := wrap(s, "", "  ", width)
		if strings.Join(strings.Fields(got), " ") != strings.Join(strings.Fields(s), " ") {
			t.Fatalf("words changed: %q -> %q", s, got)
		}
		for _, line := range strings.Split(got, "\n") {
			if utf8.RuneCountInString(line) > width && len(strings.Fields(line)) > 1 {
				t.Fatalf("line %q over %d", line, width)
			}
		}
	})
}
