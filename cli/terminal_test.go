package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/synth"
)

// attack clears the screen, colours it red and sets the window title when
// a terminal is given it raw (issue #30, item 5).
const attack = "\x1b[2J\x1b[31mPWNED\x1b]0;title-hijack\x07"

// attackShown is how the attack must appear instead: every control escaped.
const attackShown = `\x1b[2J\x1b[31mPWNED\x1b]0;title-hijack\x07`

// noRaw fails when a command's output holds a byte a terminal acts on, and
// when the attack is not shown escaped in it (it must be shown, not
// dropped, where want is set).
func noRaw(t *testing.T, what, out string, want bool) {
	t.Helper()
	for _, c := range []string{"\x1b", "\x07", "\u009b"} {
		if strings.Contains(out, c) {
			t.Errorf("%s: raw %q reaches the terminal:\n%s", what, c, out)
		}
	}
	// Go's %q writes BEL as \a: as safe, and as plainly shown.
	if want && !strings.Contains(out, attackShown) && !strings.Contains(out, strings.Trim(strconv.Quote(attack), `"`)) {
		t.Errorf("%s: the attack is not shown escaped:\n%s", what, out)
	}
}

// hostileModel writes a small llama whose name and one tensor's name are
// the attack, and, when arch is set, whose architecture is the attack too.
func hostileModel(t *testing.T, arch bool) string {
	t.Helper()
	s, _ := synth.Lookup("tinyllama-1.1b")
	b, err := synth.Build(s, synth.Q4_K_M)
	if err != nil {
		t.Fatal(err)
	}
	b.Set("general.name", gguf.StringValue(attack))
	if err := b.AddTensor(attack+".weight", gguf.TypeF32, []uint64{16}, nil); err != nil {
		t.Fatal(err)
	}
	if arch {
		if err := b.RenameArchitecture(attack); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "hostile.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestHostileTextIsEscaped: the attack as general.name, as a tensor name
// and as general.architecture printed as it was by inspect, inspect
// --tensors and fit. No ESC or BEL reaches standard output or error now;
// each is shown as \x1b, \x07.
func TestHostileTextIsEscaped(t *testing.T) {
	named, renamed := hostileModel(t, false), hostileModel(t, true)
	for _, tc := range []struct {
		args []string
		want bool // the attack is printed (escaped), not only absent
	}{
		{[]string{"inspect", named}, true},
		{[]string{"inspect", "--tensors", named}, true},
		{[]string{"inspect", renamed}, true},
		{[]string{"inspect", "--tensors", renamed}, true},
		{[]string{"fit", named, "--machine", "cpu-32", "-c", "2048"}, false},
		{[]string{"fit", renamed, "--machine", "cpu-32", "-c", "2048"}, true},
		{[]string{"plan", renamed, "--machine", "cpu-32"}, true},
	} {
		code, out, errs := run(t, tc.args...)
		what := strings.Join(tc.args[:1], " ")
		noRaw(t, what+" (stdout and stderr)", out+errs, tc.want)
		t.Logf("%v: exit %d, %d bytes out, %d err", tc.args[0], code, len(out), len(errs))
	}
	// The tensor list shows the hostile tensor's row, escaped, in its column.
	_, out, _ := run(t, "inspect", "--tensors", named)
	if !strings.Contains(out, attackShown+".weight  F32") {
		t.Errorf("inspect --tensors lacks the escaped tensor's row:\n%s", out)
	}
}

// TestHostileJSONIsExact: --json keeps the attack as the exact string (JSON
// escapes its controls), for inspect and fit.
func TestHostileJSONIsExact(t *testing.T) {
	path := hostileModel(t, true)
	code, out, errs := run(t, "inspect", "--json", "--quiet", path)
	if code != 0 {
		t.Fatalf("inspect --json: exit %d: %s", code, errs)
	}
	noRaw(t, "inspect --json", out, false)
	var r struct {
		Name    string `json:"name"`
		Arch    string `json:"architecture"`
		Tensors []struct {
			Name string `json:"name"`
		} `json:"tensors"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Name != attack || r.Arch != attack {
		t.Errorf("name %q, architecture %q; want both %q", r.Name, r.Arch, attack)
	}
	found := false
	for _, tn := range r.Tensors {
		found = found || tn.Name == attack+".weight"
	}
	if !found {
		t.Errorf("no tensor named %q in the JSON", attack+".weight")
	}
	code, out, errs = run(t, "fit", "--json", "--quiet", path, "--machine", "cpu-32")
	noRaw(t, "fit --json", out+errs, false)
	var f struct {
		Artifact struct {
			Arch string `json:"architecture"`
		} `json:"artifact"`
	}
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		t.Fatalf("fit --json: exit %d, %v\n%s", code, err, errs)
	}
	if f.Artifact.Arch != attack {
		t.Errorf("fit --json architecture %q, want %q", f.Artifact.Arch, attack)
	}
}

// TestHostileMachineFile: a --machine file naming a device and a domain
// with the attack; hw and fit print them escaped.
func TestHostileMachineFile(t *testing.T) {
	code, out, errs := run(t, "hw", "--machine", "rtx-4090", "--json")
	if code != 0 {
		t.Fatalf("hw --json: exit %d: %s", code, errs)
	}
	var snap map[string]any
	if err := json.Unmarshal([]byte(out), &snap); err != nil {
		t.Fatal(err)
	}
	devices, _ := snap["devices"].([]any)
	domains, _ := snap["domains"].([]any)
	if len(devices) < 2 || len(domains) < 2 {
		t.Fatalf("the preset has no GPU: %s", out)
	}
	for _, d := range devices[1:] {
		d.(map[string]any)["description"] = attack
	}
	devices[1].(map[string]any)["name"] = attack
	domains[1].(map[string]any)["source"] = attack
	domains[1].(map[string]any)["description"] = attack
	raw, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "machine.json")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	model := synthFile(t, "tinyllama-1.1b")
	for _, args := range [][]string{
		{"hw", "--machine", file},
		{"fit", model, "--machine", file, "-ngl", "all"},
		{"plan", model, "--machine", file},
		{"recommend", "--machine", file},
	} {
		code, out, errs := run(t, args...)
		noRaw(t, strings.Join(args[:1], " "), out+errs, true)
		t.Logf("%s: exit %d", args[0], code)
	}
}

// TestHostileHubError: a Hub error body holding the attack, as JSON and as
// plain text, quoted in the error inspect prints.
func TestHostileHubError(t *testing.T) {
	for _, ct := range []string{"application/json", "text/plain"} {
		hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ct)
			w.WriteHeader(http.StatusNotFound)
			if ct == "application/json" {
				json.NewEncoder(w).Encode(map[string]string{"error": attack})
				return
			}
			w.Write([]byte(attack))
		}))
		code, out, errs := runEnv(t, map[string]string{"HF_ENDPOINT": hub.URL}, "inspect", "hf:owner/repo/model.gguf")
		hub.Close()
		if code == 0 {
			t.Errorf("%s: inspect succeeded against a failing Hub", ct)
		}
		noRaw(t, "inspect against a Hub answering "+ct, out+errs, true)
	}
}

// TestFieldsStayOnOneLine: a name with a newline cannot forge a line of
// the report (the stream keeps its own newlines; a field's are escaped).
func TestFieldsStayOnOneLine(t *testing.T) {
	s, _ := synth.Lookup("tinyllama-1.1b")
	b, err := synth.Build(s, synth.Q4_K_M)
	if err != nil {
		t.Fatal(err)
	}
	b.Set("general.name", gguf.StringValue("tiny\nverdict\tfits\rx"))
	path := filepath.Join(t.TempDir(), "forged.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	_, out, _ := run(t, "inspect", "--quiet", path)
	if !strings.Contains(out, `tiny\nverdict\tfits\rx`) || strings.Contains(out, "\nverdict") {
		t.Errorf("the name's newline is not escaped:\n%s", out)
	}
}
