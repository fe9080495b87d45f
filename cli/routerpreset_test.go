package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/headroom-llm/headroom/admission"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/synth"
)

var updateRouterPreset = flag.Bool("update-router-preset", false, "rewrite plan --router-preset's golden file under testdata")

// TestSafeModelsMax holds --models-max: the largest k such that every k
// of the models fit together, domain by domain.
func TestSafeModelsMax(t *testing.T) {
	const g = int64(1) << 30
	tests := []struct {
		name      string
		needs     []map[string]int64
		avail     map[string]int64
		want      int
		wantLimit string
	}{
		{name: "all fit", needs: []map[string]int64{{"gpu0": 4 * g}, {"gpu0": 4 * g}, {"gpu0": 4 * g}}, avail: map[string]int64{"gpu0": 12 * g}, want: 3},
		{name: "two of three", needs: []map[string]int64{{"gpu0": 5 * g}, {"gpu0": 1 * g}, {"gpu0": 5 * g}}, avail: map[string]int64{"gpu0": 10 * g}, want: 2, wantLimit: "gpu0"},
		// The two largest do not fit together, though the small one fits
		// beside either: not every pair fits.
		{name: "two largest too many", needs: []map[string]int64{{"gpu0": 6 * g}, {"gpu0": 1 * g}, {"gpu0": 5 * g}}, avail: map[string]int64{"gpu0": 10 * g}, want: 1, wantLimit: "gpu0"},
		// Each domain has its own worst set: gpu0 takes any two, ram
		// the two that need the most in it do not fit.
		{name: "the tighter domain decides", needs: []map[string]int64{{"gpu0": 2 * g, "ram": 6 * g}, {"gpu0": 6 * g, "ram": 1 * g}, {"gpu0": 2 * g, "ram": 5 * g}},
			avail: map[string]int64{"gpu0": 8 * g, "ram": 10 * g}, want: 1, wantLimit: "ram"},
		{name: "exact fit counts", needs: []map[string]int64{{"ram": 5 * g}, {"ram": 5 * g}}, avail: map[string]int64{"ram": 10 * g}, want: 2},
		{name: "one model", needs: []map[string]int64{{"ram": 5 * g}}, avail: map[string]int64{"ram": 10 * g}, want: 1},
		{name: "none fits", needs: []map[string]int64{{"ram": 11 * g}}, avail: map[string]int64{"ram": 10 * g}, want: 0, wantLimit: "ram"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, limit := admission.SafeTogether(tc.needs, tc.avail)
			if k != tc.want || limit != tc.wantLimit {
				t.Errorf("got %d (%q), want %d (%q)", k, limit, tc.want, tc.wantLimit)
			}
		})
	}
}

// TestRouterPresetGolden writes the presets file of three catalog
// models on a 12 GB card that holds two of them at 8192 cells.
func TestRouterPresetGolden(t *testing.T) {
	out := filepath.Join(t.TempDir(), "models.ini")
	code, stdout, stderr := run(t, "plan", "--router-preset", out, "--machine", "rtx-5070", "-c", "8192", "-np", "1", "--quiet",
		"qwen3-8b/Q4_K_M", "qwen3-0.6b/Q8_0", "llama-3.1-8b-instruct/Q4_K_M")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "--models-max 2:") || !strings.Contains(stdout, "llama-server --models-preset "+out+" --models-max 2") {
		t.Errorf("stdout does not say --models-max 2:\n%s", stdout)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "router-preset.ini")
	if *updateRouterPreset {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("presets file differs from %s (go test ./cli -run TestRouterPresetGolden -update-router-preset rewrites it):\n%s", golden, got)
	}
}

// TestRouterPresetRefuses: a flag the INI cannot hold, and a set named
// twice, are refused with the reason.
func TestRouterPresetRefuses(t *testing.T) {
	if _, err := presetKeys([]string{"-c", "4096", "-ot", "a;b"}); err == nil || !strings.Contains(err.Error(), "INI") {
		t.Errorf("a value with ; was written: %v", err)
	}
	if _, err := presetKeys([]string{"-c"}); err == nil {
		t.Error("a flag without its value was written")
	}
	kv, err := presetKeys([]string{"-c", "4096", "--no-mmap", "-np", "2", "-kvu"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "[[c 4096] [no-mmap true] [np 2] [kvu true]]"; fmt.Sprint(kv) != want {
		t.Errorf("keys %v, want %s", kv, want)
	}
	// Flags passed through keep their own arity, read from llama.cpp's
	// table: --jinja takes no value, -t one.
	kv, err = presetKeys([]string{"-c", "4096", "--jinja", "-t", "2", "--no-cache-idle-slots", "-cmoe", "--api-key", "k"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "[[c 4096] [jinja true] [t 2] [no-cache-idle-slots true] [cmoe true] [api-key k]]"; fmt.Sprint(kv) != want {
		t.Errorf("keys %v, want %s", kv, want)
	}
	code, _, stderr := run(t, "plan", "--router-preset", filepath.Join(t.TempDir(), "x.ini"), "--machine", "rtx-5070", "--quiet", "qwen3-0.6b/Q8_0", "qwen3-0.6b/Q8_0")
	if code == 0 || !strings.Contains(stderr, "would both be named") {
		t.Errorf("a model named twice: exit %d, %s", code, stderr)
	}
	code, _, stderr = run(t, "plan", "--router-preset", filepath.Join(t.TempDir(), "x.ini"), "--machine", "rtx-5070", "--json", "qwen3-0.6b/Q8_0")
	if code == 0 || !strings.Contains(stderr, "takes no --json") {
		t.Errorf("--json with --router-preset: exit %d, %s", code, stderr)
	}
	code, _, stderr = run(t, "plan", "--machine", "rtx-5070", "qwen3-0.6b/Q8_0", "qwen3-8b/Q4_K_M")
	if code == 0 || !strings.Contains(stderr, "--router-preset") {
		t.Errorf("two models without --router-preset: exit %d, %s", code, stderr)
	}
}

// TestLiveRouterPreset starts llama-server's own router on a presets file
// plan --router-preset wrote for two local files, and checks that it
// reads the file and lists both models under their names, loading none
// (--no-models-autoload).
func TestLiveRouterPreset(t *testing.T) {
	bin := liveEngine(t)
	dir := t.TempDir()
	src := writeShape(t, t.TempDir(), "tinyllama-1.1b", synth.Q4_K_M)
	var files []string
	for _, n := range []string{"a", "b"} {
		p := filepath.Join(dir, n+".gguf")
		if err := os.Link(src, p); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	ini := filepath.Join(dir, "models.ini")
	args := append([]string{"plan", "--router-preset", ini, "--machine", "cpu-32", "-c", "2048", "-np", "1", "--quiet"}, files...)
	if code, stdout, stderr := run(t, args...); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--models-preset", ini, "--models-max", "2", "--no-models-autoload", "--host", "127.0.0.1", "--port", fmt.Sprint(port))
	var log syncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	var listed struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/models", port))
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&listed)
			resp.Body.Close()
			if err == nil && resp.StatusCode == 200 {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("the router never listed its models: %v\n%s", err, log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	var ids []string
	for _, m := range listed.Data {
		ids = append(ids, m.ID)
	}
	if !slices.Contains(ids, "a") || !slices.Contains(ids, "b") {
		t.Errorf("the router lists %v, want a and b\n%s", ids, log.String())
	}
	if strings.Contains(log.String(), "ignoring option") {
		t.Errorf("the router ignored an option of the file:\n%s", log.String())
	}
}

// TestRouterPresetDestination: --router-preset replaces only a presets
// file it wrote. A model named where the INI should go (plan
// --router-preset a.gguf b.gguf) is left byte-identical, a symbolic link
// is not followed (its target is left as it was), --force replaces a
// file that is not a preset, and a file headroom wrote is replaced.
func TestRouterPresetDestination(t *testing.T) {
	dir := t.TempDir()
	// A model's bytes stand in for a model: what matters is that they
	// are left alone.
	a, b := filepath.Join(dir, "a.gguf"), synthFile(t, "qwen3-0.6b")
	before := []byte("GGUF\x03\x00\x00\x00 a model's 637 MiB")
	if err := os.WriteFile(a, before, 0o644); err != nil {
		t.Fatal(err)
	}
	presetOf := func(out string, extra ...string) (int, string) {
		args := append([]string{"plan", "--router-preset", out, "--machine", "rtx-5070", "--quiet"}, extra...)
		code, _, errs := run(t, append(args, b)...)
		return code, errs
	}
	if code, errs := presetOf(a); code != exitUsage || !strings.Contains(errs, "is not a presets file headroom wrote") {
		t.Errorf("a model as the presets file: exit %d, %s", code, errs)
	}
	if after, _ := os.ReadFile(a); string(after) != string(before) {
		t.Fatalf("the model named as the presets file was changed (%d bytes, was %d)", len(after), len(before))
	}
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.ini")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	if code, errs := presetOf(link, "--force"); code != exitUsage || !strings.Contains(errs, "symbolic link") {
		t.Errorf("a link: exit %d, %s", code, errs)
	}
	if got, _ := os.ReadFile(secret); string(got) != "keep me" {
		t.Errorf("the link's target was written: %q", got)
	}
	other := filepath.Join(dir, "notes.ini")
	os.WriteFile(other, []byte("[mine]\nx = 1\n"), 0o644)
	if code, errs := presetOf(other); code != exitUsage {
		t.Errorf("a file headroom did not write, without --force: exit %d, %s", code, errs)
	}
	if code, errs := presetOf(other, "--force"); code != 0 {
		t.Errorf("--force: exit %d, %s", code, errs)
	}
	if code, errs := presetOf(other); code != 0 {
		t.Errorf("replacing a presets file headroom wrote: exit %d, %s", code, errs)
	}
}

// TestRouterPresetInjection: paths and names llama.cpp's preset parser
// would split or read as another section are refused, never written: a
// directory with ";" (the value would end there), one with a line break
// (a key of its own), and a file whose stem is "*" (the section for
// every model).
func TestRouterPresetInjection(t *testing.T) {
	for _, c := range []struct{ dir, file, says string }{
		{"semi;colon", "m.gguf", "cannot be written"},
		{"line\nbreak", "m.gguf", "cannot be written"},
		{"plain", "*.gguf", "cannot name a section"},
		{"eq=sign", "m.gguf", "cannot be written"},
	} {
		dir := filepath.Join(t.TempDir(), c.dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		model := filepath.Join(dir, c.file)
		if err := os.Rename(writeShape(t, dir, "qwen3-0.6b", synth.Q8_0), model); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "p.ini")
		code, _, errs := run(t, "plan", "--router-preset", out, "--machine", "rtx-5070", "--quiet", model)
		if code == 0 || !strings.Contains(errs, c.says) {
			t.Errorf("%q/%q: exit %d, %s; want refused: %s", c.dir, c.file, code, errs, c.says)
		}
		if _, err := os.Stat(out); err == nil {
			got, _ := os.ReadFile(out)
			t.Errorf("%q/%q: a presets file was written:\n%s", c.dir, c.file, got)
		}
	}
}
