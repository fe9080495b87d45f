package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/gguf"
)

// TestInspectCutsLongStrings: inspect --json of a header holding a 250 MiB
// string ran 95 s and wrote 1.5 GB, since arrays were cut and strings not.
// A 32 MiB string (as the name and as another key) now prints cut, marked
// as cut with its length, in bounded time and output; --full prints it
// whole.
func TestInspectCutsLongStrings(t *testing.T) {
	const long = 32 << 20
	big := strings.Repeat("é", long/2)
	b := gguf.NewBuilder()
	b.Set("general.architecture", gguf.StringValue("llama"))
	b.Set("general.name", gguf.StringValue(big))
	b.Set("hostile.string", gguf.StringValue(big))
	b.Set("hostile.strings", gguf.StringsValue([]string{"short", big}))
	path := filepath.Join(t.TempDir(), "hostile.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, out, errs := run(t, "inspect", "--json", "--quiet", path)
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("inspect --json: exit %d\n%s", code, errs)
	}
	if len(out) > 64<<10 || took > 5*time.Second {
		t.Errorf("inspect --json wrote %d bytes in %v; want under 64 KiB and 5 s", len(out), took)
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
	t.Logf("inspect --json of 3 strings of 32 MiB: %d bytes in %v", len(out), took.Round(time.Millisecond))

	code, out, _ = run(t, "inspect", "--quiet", path)
	if code != 0 || len(out) > 64<<10 {
		t.Errorf("inspect (text): exit %d, %d bytes; want a page", code, len(out))
	}
	code, out, _ = run(t, "inspect", "--json", "--full", "--quiet", path)
	if code != 0 || !strings.Contains(out, big) {
		t.Errorf("inspect --json --full: exit %d, %d bytes; want the strings whole", code, len(out))
	}
}
