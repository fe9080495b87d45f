package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/synth"
)

// run runs headroom with args and a clean environment (no cache, no token).
func run(t testing.TB, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runEnv(t, nil, args...)
}

// runEnv runs headroom with a home directory of the test's own and the
// given environment variables.
func runEnv(t testing.TB, vars map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runIn(t.TempDir(), vars, args...)
}

// runIn runs headroom with home as its home directory, so that what one
// run keeps in the user cache the next one reads.
func runIn(home string, vars map[string]string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errb, Getenv: homeGetenv(home, vars)}
	code = Main(context.Background(), args, env)
	return code, out.String(), errb.String()
}

// homeGetenv is an environment of home as HOME and vars.
func homeGetenv(home string, vars map[string]string) func(string) string {
	return func(k string) string {
		if k == "HOME" {
			return home
		}
		return vars[k]
	}
}

func synthFile(t testing.TB, shape string) string {
	t.Helper()
	s, _ := synth.Lookup(shape)
	b, err := synth.Build(s, synth.Q4_K_M)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), shape+".gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestInspectHuman(t *testing.T) {
	path := synthFile(t, "tinyllama-1.1b")
	code, out, errs := run(t, "inspect", path, "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"TinyLlama-1.1B", "architecture     llama", "1.10 B, Q4_K_M", "trained context  2048",
		"layers           22", "KV heads         4", "32000 tokens (llama)", "GGUF v3", "201 tensors",
		"Q4_K", "Q6_K", "F32", "total",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "blk.0.attn_q.weight") {
		t.Errorf("tensors listed without --tensors")
	}
	_, out, _ = run(t, "inspect", "--tensors", path)
	if !regexp.MustCompile(`(?m)^blk\.21\.ffn_down\.weight +Q6_K +5632x2048 +9461760 +1 +604596224$`).MatchString(out) {
		t.Errorf("--tensors lacks the last ffn_down:\n%s", out)
	}
}

func TestInspectJSON(t *testing.T) {
	path := synthFile(t, "llama-3.2-1b")
	code, out, errs := run(t, "inspect", path, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r struct {
		Artifact struct {
			Kind  string `json:"kind"`
			Files []struct {
				Size int64 `json:"size"`
			} `json:"files"`
		} `json:"artifact"`
		Architecture string  `json:"architecture"`
		Parameters   uint64  `json:"parameters"`
		SizeBytes    int64   `json:"size_bytes"`
		TensorCount  int     `json:"tensor_count"`
		FileType     string  `json:"file_type"`
		BitsPerWt    float64 `json:"bits_per_weight"`
		Types        []struct {
			Type  string `json:"type"`
			Bytes uint64 `json:"bytes"`
		} `json:"types"`
		Metadata []struct {
			Key   string `json:"key"`
			Len   *int   `json:"len"`
			Cut   bool   `json:"truncated"`
			Value any    `json:"value"`
		} `json:"metadata"`
		Tensors []struct {
			Name  string   `json:"name"`
			Shape []uint64 `json:"shape"`
		} `json:"tensors"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	st, _ := os.Stat(path)
	if r.Architecture != "llama" || r.Parameters != 1235814432 || r.SizeBytes != st.Size() || r.FileType != "Q4_K_M" {
		t.Errorf("report: %+v", r)
	}
	if r.Artifact.Kind != "local" || len(r.Artifact.Files) != 1 || r.Artifact.Files[0].Size != st.Size() {
		t.Errorf("artifact: %+v", r.Artifact)
	}
	if r.TensorCount != len(r.Tensors) || r.TensorCount != 2+16*9+1 {
		t.Errorf("%d tensors, %d listed", r.TensorCount, len(r.Tensors))
	}
	var sum uint64
	for _, ty := range r.Types {
		sum += ty.Bytes
	}
	if r.BitsPerWt < 4 || r.BitsPerWt > 6 || sum == 0 {
		t.Errorf("bits per weight %.2f, type bytes %d", r.BitsPerWt, sum)
	}
	for _, m := range r.Metadata {
		if m.Key == "tokenizer.ggml.tokens" {
			if m.Len == nil || *m.Len != 128256 || !m.Cut || len(m.Value.([]any)) != jsonArrayLimit {
				t.Errorf("tokens: len %v, cut %v", m.Len, m.Cut)
			}
		}
	}
}

func TestInspectMalformed(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.gguf")
	// A valid start, then a metadata key claiming 2^40 bytes.
	hdr := []byte("GGUF\x03\x00\x00\x00" + "\x00\x00\x00\x00\x00\x00\x00\x00" + "\x01\x00\x00\x00\x00\x00\x00\x00" + "\x00\x00\x00\x00\x00\x01\x00\x00")
	if err := os.WriteFile(bad, append(hdr, make([]byte, 100)...), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, "inspect", bad)
	if code != 2 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	if strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "offset 24") || !strings.Contains(errs, "string length 1099511627776") {
		t.Errorf("error should be one line naming the offset and the problem: %q", errs)
	}
	notGGUF := filepath.Join(dir, "notes.txt")
	os.WriteFile(notGGUF, []byte("hello world"), 0o644)
	if code, _, errs := run(t, "inspect", notGGUF); code != 2 || !strings.Contains(errs, "not a GGUF file") {
		t.Errorf("exit %d: %s", code, errs)
	}
	if code, _, errs := run(t, "inspect", filepath.Join(dir, "missing.gguf")); code != 2 || !strings.Contains(errs, "missing.gguf") {
		t.Errorf("missing file: exit %d: %s", code, errs)
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string // in stdout
		err  string // in stderr
	}{
		{nil, 0, "Commands:", ""},
		{[]string{"help"}, 0, "inspect", ""},
		{[]string{"help", "inspect"}, 0, "hf:owner/repo:QUANT", ""},
		{[]string{"inspect", "--help"}, 0, "--tensors", ""},
		{[]string{"inspect"}, 2, "", "need exactly one MODEL"},
		{[]string{"inspect", "a", "b"}, 2, "", "got 2 arguments"},
		{[]string{"inspect", "--bogus", "x"}, 2, "", "unknown flag -bogus"},
		{[]string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		// Did you mean, for each kind of name.
		{[]string{"recomend"}, 2, "", `unknown command "recomend" (did you mean recommend?)`},
		{[]string{"fit", "x.gguf", "--ctx", "8192"}, 2, "", "unknown flag -ctx (did you mean -c, --ctx-size?"},
		{[]string{"plan", "x.gguf", "--paralel", "2"}, 2, "", "did you mean -np, --parallel?"},
		{[]string{"fit", "qwen3-0.6b/Q8_0", "--machine", "rtx4090"}, 2, "", "did you mean the preset rtx-4090?"},
		{[]string{"fit", "llama-3.2-1b-instruc/Q4_K_M"}, 1, "", "did you mean llama-3.2-1b-instruct/Q4_K_M?"},
		{[]string{"fit", "qwen3-0.6b/Q4_K_X"}, 1, "", "the catalog has no Q4_K_X variant of qwen3-0.6b (did you mean qwen3-0.6b/Q4_K_M? it has"},
		{[]string{"fit", "qwen3-0.6b/Q9_9_9"}, 1, "", "the catalog has no Q9_9_9 variant of qwen3-0.6b (it has"},
		{[]string{"synth", "--list"}, 0, "llama-3.1-70b", ""},
		{[]string{"synth", "gpt-9", "/tmp/x.gguf"}, 2, "", `unknown shape "gpt-9"`},
		{[]string{"synth", "--quant", "Q3", "llama-3.1-8b", "/tmp/x.gguf"}, 2, "", "unknown quantization"},
		{[]string{"synth", "--weights", "ones", "llama-3.1-8b", "/tmp/x.gguf"}, 2, "", `unknown weights "ones"`},
		{[]string{"synth", "--layers", "33", "llama-3.1-8b", "/tmp/x.gguf"}, 2, "", "has 32 layers, cannot keep 33"},
	}
	for _, tc := range tests {
		code, out, errs := run(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errs, tc.err) {
			t.Errorf("%v: exit %d\nstdout: %s\nstderr: %s", tc.args, code, out, errs)
		}
	}
}

func TestSynthCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	code, out, errs := run(t, "synth", "--quant", "q8_0", "qwen3-8b", path)
	if code != 0 || !strings.Contains(out, "Qwen3-8B Q8_0, 399 tensors") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	code, out, _ = run(t, "inspect", path, "--quiet")
	if code != 0 || !strings.Contains(out, "qwen3") || !strings.Contains(out, "8.19 B, Q8_0") {
		t.Errorf("inspect of synth output: %s", out)
	}
}

// TestSynthWeights writes a routed twin of LFM2 cut to two layers: the
// embedding and the norms hold data, the other matrices are still zero,
// and inspect reads the file.
func TestSynthWeights(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	code, out, errs := run(t, "synth", "--weights", "routed", "--layers", "2", "lfm2-350m", path)
	if code != 0 || !strings.Contains(out, "(first 2 of 16 layers)") || !strings.Contains(out, "of routing weights, the rest sparse") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	r, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st, _ := r.Stat()
	f, err := gguf.Read(r, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		filled bool
	}{
		{"token_embd.weight", true}, {"blk.1.ffn_norm.weight", true},
		{"blk.1.ffn_up.weight", false}, {"blk.0.shortconv.in_proj.weight", false},
	} {
		var ti gguf.TensorInfo
		for _, x := range f.Tensors {
			if x.Name == c.name {
				ti = x
			}
		}
		if ti.Name == "" {
			t.Fatalf("no tensor %s", c.name)
		}
		buf := make([]byte, ti.Size)
		if _, err := r.ReadAt(buf, f.DataOffset+int64(ti.Offset)); err != nil {
			t.Fatal(err)
		}
		if filled := !bytes.Equal(buf, make([]byte, len(buf))); filled != c.filled {
			t.Errorf("%s filled %v, want %v", c.name, filled, c.filled)
		}
	}
	if code, out, _ = run(t, "inspect", path, "--quiet"); code != 0 || !strings.Contains(out, "lfm2") {
		t.Errorf("inspect of the routed twin: %s", out)
	}
}

// BenchmarkInspect70B runs the whole inspect command, file open to printed
// table, on a sparse Llama-3.1-70B Q4_K_M file.
func BenchmarkInspect70B(b *testing.B) {
	path := synthFile(b, "llama-3.1-70b")
	env := Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(string) string { return "" }}
	b.ReportAllocs()
	for b.Loop() {
		env.Stdout.(*bytes.Buffer).Reset()
		if code := Main(context.Background(), []string{"inspect", "--quiet", path}, env); code != 0 {
			b.Fatalf("exit %d: %s", code, env.Stderr)
		}
	}
}
