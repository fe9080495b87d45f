package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

// TestInspectCutsLongStrings: inspect --json of a header holding a 250 MiB
// string ran 95 s and wrote 1.5 GB, since arrays were cut and strings not.
// A 32 MiB string (as the name and as another key) now prints cut, marked
// as cut with its length, in bounded output; --full prints it whole. How
// long it takes is BenchmarkInspectLongStrings's to say: a time bound here
// failed under the race detector on a busy CI machine (5.2 s).
func TestInspectCutsLongStrings(t *testing.T) {
	const long = 32 << 20
	path, big := hostileStrings(t, long)
	code, out, errs := run(t, "inspect", "--json", "--quiet", path)
	if code != 0 {
		t.Fatalf("inspect --json: exit %d\n%s", code, errs)
	}
	if len(out) > 64<<10 {
		t.Errorf("inspect --json wrote %d bytes; want under 64 KiB", len(out))
	}
	var r struct {
		Name     string `json:"name"`
		Metadata []struct {
			Key   string `json:"key"`
			Len   *int   `json:"len"`
			Cut   bool   `json:"truncated"`
			Value any    `json:"value"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Name, "cut: 33554432 bytes") {
		t.Errorf("name %.80q...: want it cut and saying so", r.Name)
	}
	for _, m := range r.Metadata {
		if !strings.HasPrefix(m.Key, "hostile.") && m.Key != "general.name" {
			continue
		}
		if !m.Cut {
			t.Errorf("%s: not marked as truncated", m.Key)
		}
		if m.Key == "hostile.string" && (m.Len == nil || *m.Len != long) {
			t.Errorf("%s: len %v, want %d", m.Key, m.Len, long)
		}
	}

	code, out, _ = run(t, "inspect", "--quiet", path)
	if code != 0 || len(out) > 64<<10 {
		t.Errorf("inspect (text): exit %d, %d bytes; want a page", code, len(out))
	}
	code, out, _ = run(t, "inspect", "--json", "--full", "--quiet", path)
	if code != 0 || !strings.Contains(out, big) {
		t.Errorf("inspect --json --full: exit %d, %d bytes; want the strings whole", code, len(out))
	}
}

// hostileStrings writes a header whose name, one other key and one
// element of a string array are each a string of long bytes.
func hostileStrings(tb testing.TB, long int) (path, big string) {
	tb.Helper()
	big = strings.Repeat("é", long/2)
	b := gguf.NewBuilder()
	b.Set("general.architecture", gguf.StringValue("llama"))
	b.Set("general.name", gguf.StringValue(big))
	b.Set("hostile.string", gguf.StringValue(big))
	b.Set("hostile.strings", gguf.StringsValue([]string{"short", big}))
	path = filepath.Join(tb.TempDir(), "hostile.gguf")
	if err := b.WriteFile(path); err != nil {
		tb.Fatal(err)
	}
	return path, big
}

// BenchmarkInspectLongStrings runs inspect --json, file open to printed
// JSON, on a header holding three strings of 32 MiB (96 MiB read and
// checked as UTF-8, 17 KiB printed).
func BenchmarkInspectLongStrings(b *testing.B) {
	path, _ := hostileStrings(b, 32<<20)
	env := Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(string) string { return "" }}
	b.ReportAllocs()
	for b.Loop() {
		env.Stdout.(*bytes.Buffer).Reset()
		if code := Main(context.Background(), []string{"inspect", "--json", "--quiet", path}, env); code != 0 {
			b.Fatalf("exit %d: %s", code, env.Stderr)
		}
	}
}
