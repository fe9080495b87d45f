package conformance

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// goldenDir holds the node-llama-cpp library loads, serverDir llama-server's,
// serverCUDADir llama-server's on a borrowed NVIDIA GPU (conformance/gpu),
// which has no records until such a machine has measured them.
const (
	goldenDir     = "testdata/golden"
	serverDir     = "testdata/server"
	serverCUDADir = "testdata/server-cuda"
)

// loadGolden reads the golden sets: every check of a file's consistency
// and of its synth header holds for either driver and any backend.
func loadGolden(t *testing.T) []Case {
	t.Helper()
	var all []Case
	dirs := []string{serverDir, goldenDir}
	if m, _ := filepath.Glob(filepath.Join(serverCUDADir, "*.json")); len(m) > 0 {
		dirs = append(dirs, serverCUDADir)
	}
	for _, dir := range dirs {
		cases, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, cases...)
	}
	return all
}

// Every committed golden file must read and pass the consistency checks:
// this is what keeps a half-written or hand-edited file out.
func TestGoldenFilesAreConsistent(t *testing.T) {
	cases := loadGolden(t)
	archs := map[string]int{}
	backends := map[string]int{}
	for _, c := range cases {
		archs[c.Inputs.Arch]++
		backends[c.Inputs.Profile.Backend]++
	}
	t.Logf("%d cases; by architecture %v; by backend %v", len(cases), archs, backends)
}

// A golden file is evidence only about the header it was measured on. When
// synth changes a shape, this fails until the goldens are
// regenerated (conformance/regen.sh).
func TestGoldenFilesMatchCurrentSynth(t *testing.T) {
	cases := loadGolden(t)
	checked := map[string]error{}
	for _, c := range cases {
		key := c.Inputs.Shape + ":" + c.Inputs.Quant + ":" + c.Inputs.File.HeaderSHA256
		if _, done := checked[key]; !done {
			checked[key] = c.CheckSynth()
		}
		if err := checked[key]; err != nil {
			t.Errorf("%s: %v", c.ID, err)
		}
	}
}

// The validator must catch each way a golden file can go wrong. Each row
// breaks one thing in a copy of a real case.
func TestValidateCatchesBrokenCases(t *testing.T) {
	base := pickCase(t, func(c *Case) bool { return len(c.Figures.KVCaches) > 0 && len(c.BuffersOf("kv")) > 0 })
	tests := []struct {
		name   string
		break_ func(c *Case)
		want   string
	}{
		{"wrong id", func(c *Case) { c.ID = "other" }, "does not match the file name"},
		{"cpu with gpu layers", func(c *Case) {
			c.Inputs.Profile.Backend = "cpu"
			c.Engine.Backend = "cpu"
			c.Inputs.Profile.GPULayers = 4
		}, "cpu backend with gpu_layers"},
		{"cuda without a CUDA layer", func(c *Case) {
			c.Inputs.Profile.Backend = "cuda"
			c.Engine.Backend = "cuda"
			c.Inputs.Profile.GPULayers = 4
		}, "no layer on a CUDA device"},
		{"missing digest", func(c *Case) { c.Inputs.File.HeaderSHA256 = "" }, "header digest"},
		{"lost compute buffer", func(c *Case) { c.Figures.Buffers = without(c.Figures.Buffers, "compute") }, "no compute buffer"},
		{"lost kv buffer", func(c *Case) { c.Figures.Buffers = without(c.Figures.Buffers, "kv") }, "KV cache"},
		{"kv size off", func(c *Case) { c.Figures.KVCaches[0].SizeMiB += 1 }, "KV cache"},
		{"duplicate buffer", func(c *Case) { c.Figures.Buffers = append(c.Figures.Buffers, c.Figures.Buffers[0]) }, "listed twice"},
		{"unknown kind", func(c *Case) { c.Figures.Buffers[0].Kind = "weights" }, "unknown kind"},
		{"printed disagrees", func(c *Case) { c.Figures.Buffers[0].MiB += 0.01 }, "does not read as"},
		{"layer missing", func(c *Case) { c.Figures.Layers = c.Figures.Layers[1:] }, "layer placements"},
		{"n_ctx inconsistent", func(c *Case) { c.Figures.Context.NCtx++ }, "is not n_ctx_seq"},
		{"sequences disagree", func(c *Case) { c.Figures.Context.NSeqMax++ }, "n_seq_max"},
		{"no log line", func(c *Case) { c.Log = nil }, "no log line"},
		{"speculative without a draft context", func(c *Case) { c.Inputs.Profile.Spec = "draft-mtp" }, "without the draft context"},
	}
	if problems := clone(t, base).validate(); len(problems) > 0 {
		t.Fatalf("the unbroken case fails: %v", problems)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := clone(t, base)
			tc.break_(c)
			problems := strings.Join(c.validate(), "; ")
			if !strings.Contains(problems, tc.want) {
				t.Errorf("want a problem mentioning %q, got %q", tc.want, problems)
			}
		})
	}
	// The draft context's figures are held to the same checks.
	spec := pickCase(t, func(c *Case) bool { return c.Figures.Draft != nil && c.Inputs.Profile.Draft != "" })
	for name, tc := range map[string]struct {
		break_ func(c *Case)
		want   string
	}{
		"draft compute lost": {func(c *Case) { c.Figures.Draft.Buffers = without(c.Figures.Draft.Buffers, "compute") }, "draft no compute buffer"},
		"draft model lost":   {func(c *Case) { c.Figures.Draft.Buffers = without(c.Figures.Draft.Buffers, "model") }, "draft no model buffer"},
		"draft kv size off":  {func(c *Case) { c.Figures.Draft.KVCaches[0].SizeMiB += 1 }, "draft KV cache"},
		"draft sequences":    {func(c *Case) { c.Figures.Draft.Context.NSeqMax++ }, "the draft context has"},
	} {
		t.Run(name, func(t *testing.T) {
			c := clone(t, spec)
			tc.break_(c)
			if problems := strings.Join(c.validate(), "; "); !strings.Contains(problems, tc.want) {
				t.Errorf("want a problem mentioning %q, got %q", tc.want, problems)
			}
		})
	}
}

func TestBufferMatchesAndBounds(t *testing.T) {
	tests := []struct {
		printed string
		in      []int64
		out     []int64
	}{
		{"636.18", []int64{667083571, 667078000}, []int64{667077000, 667089000}},
		{"0.12", []int64{128000, 126000}, []int64{120000, 131100}},
		{"88.00", []int64{88 << 20}, []int64{88<<20 + 6000}},
		{"0.00", []int64{0, 5000}, []int64{5300}},
	}
	for _, tc := range tests {
		b := Buffer{Printed: tc.printed}
		lo, hi := b.Bounds()
		if !b.Matches(lo) || !b.Matches(hi) || b.Matches(hi+1) || (lo > 0 && b.Matches(lo-1)) {
			t.Errorf("%s: bounds [%d, %d] are not tight", tc.printed, lo, hi)
		}
		for _, n := range tc.in {
			if !b.Matches(n) || n < lo || n > hi {
				t.Errorf("%s: %d bytes should match (bounds [%d, %d])", tc.printed, n, lo, hi)
			}
		}
		for _, n := range tc.out {
			if b.Matches(n) {
				t.Errorf("%s: %d bytes should not match", tc.printed, n)
			}
		}
	}
}

func TestFlashAttentionJSON(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want FlashAttention
	}{{"true", FlashOn}, {"false", FlashOff}, {`"auto"`, FlashAuto}} {
		var f FlashAttention
		if err := json.Unmarshal([]byte(tc.in), &f); err != nil || f != tc.want {
			t.Errorf("%s: got %q, %v", tc.in, f, err)
		}
		out, err := json.Marshal(f)
		if err != nil || string(out) != tc.in {
			t.Errorf("%s: marshals to %s, %v", tc.in, out, err)
		}
	}
	var f FlashAttention
	if err := json.Unmarshal([]byte(`"yes"`), &f); err == nil {
		t.Error(`"yes" accepted`)
	}
}

func TestLoadReportsEveryBadFile(t *testing.T) {
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("an empty directory loaded without error")
	}
	dir := t.TempDir()
	base := pickCase(t, func(*Case) bool { return true })
	for _, name := range []string{"a", "b"} {
		c := clone(t, base)
		data, _ := json.Marshal(c) // id no longer matches the file name
		writeFile(t, filepath.Join(dir, name+".json"), data)
	}
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), "a.json") || !strings.Contains(err.Error(), "b.json") {
		t.Errorf("want errors naming a.json and b.json, got %v", err)
	}
}

func pickCase(t *testing.T, want func(*Case) bool) *Case {
	t.Helper()
	cases := loadGolden(t)
	sort.Slice(cases, func(i, j int) bool { return cases[i].ID < cases[j].ID })
	for i := range cases {
		if want(&cases[i]) {
			return &cases[i]
		}
	}
	t.Skip("no golden case of the kind this test needs")
	return nil
}

// clone deep-copies a case through JSON, keeping its path.
func clone(t *testing.T, c *Case) *Case {
	t.Helper()
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeCase(data)
	if err != nil {
		t.Fatal(err)
	}
	out.Path = c.Path
	return out
}

func without(bufs []Buffer, kind string) []Buffer {
	var out []Buffer
	for _, b := range bufs {
		if b.Kind != kind {
			out = append(out, b)
		}
	}
	return out
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
