package engine

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/headroom-llm/headroom/conformance"
)

// goldenCases are real llama.cpp loads recorded by the conformance
// harness, read once: several tests walk all of them.
var goldenCases = sync.OnceValues(func() ([]conformance.Case, error) {
	return conformance.Load(filepath.Join("..", "conformance", "testdata", "golden"))
})

func loadGolden(t *testing.T) []conformance.Case {
	t.Helper()
	cases, err := goldenCases()
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 100 {
		t.Fatalf("%d golden cases, want the full set (over 100)", len(cases))
	}
	return cases
}

// TestParseLogGolden holds ParseLog to the harness's reading of every
// recorded llama.cpp log: the same buffers, in the same order, with the
// same names, caches and printed figures.
func TestParseLogGolden(t *testing.T) {
	for _, c := range loadGolden(t) {
		got := ParseLog(c.Log)
		want := make([]Logged, len(c.Figures.Buffers))
		for i, b := range c.Figures.Buffers {
			want[i] = Logged{Source: b.Source, Device: b.DeviceOrBufferType, Kind: b.Kind, Cache: b.Cache, MiB: b.MiB, Printed: b.Printed}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.ID, got, want)
		}
	}
}

// TestParseLogPrefixed replays golden logs as llama-server prints them,
// with its timestamp and level prefix (and colour codes), and expects the
// same buffers as from the bare lines.
func TestParseLogPrefixed(t *testing.T) {
	prefixes := []struct {
		name string
		add  func(i int, s string) string
	}{
		{"timestamp and level", func(i int, s string) string { return fmt.Sprintf("0.00.%03d.456 I %s", i%1000, s) }},
		{"level only", func(_ int, s string) string { return "I " + s }},
		{"colours", func(i int, s string) string {
			return fmt.Sprintf("\x1b[34m0.01.002.%03d\x1b[0m \x1b[32mI \x1b[0m%s\r\n", i%1000, s)
		}},
	}
	cases := loadGolden(t)
	for _, p := range prefixes {
		t.Run(p.name, func(t *testing.T) {
			for _, c := range cases[:20] {
				lines := make([]string, len(c.Log))
				for i, l := range c.Log {
					lines[i] = p.add(i, l)
				}
				if got, want := ParseLog(lines), ParseLog(c.Log); !reflect.DeepEqual(got, want) || len(want) == 0 {
					t.Errorf("%s:\n got %+v\nwant %+v", c.ID, got, want)
				}
			}
		})
	}
}

func TestParseLogLines(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  []Logged
	}{
		{
			// ggml-org/llama.cpp#16865: a ROCm load on a desktop whose
			// locale writes a decimal comma.
			name: "decimal comma",
			lines: []string{
				"load_tensors:        ROCm0 model buffer size =  3638,28 MiB",
				"llama_kv_cache:      ROCm0 KV buffer size =    10,50 MiB",
			},
			want: []Logged{
				{Source: "load_tensors", Device: "ROCm0", Kind: "model", MiB: 3638.28, Printed: "3638.28"},
				{Source: "llama_kv_cache", Device: "ROCm0", Kind: "kv", MiB: 10.5, Printed: "10.50"},
			},
		},
		{
			// ggml-org/ci, a CUDA run of build 2459 (March 2024): the
			// weights lines named no kind then; other functions' lines
			// without one are not weights and stay unread.
			name: "weights lines of 2024",
			lines: []string{
				"llm_load_tensors:        CPU buffer size =    132.81 MiB",
				"llm_load_tensors:      CUDA0 buffer size =   6695.84 MiB",
				"llama_new_context_with_model:      CUDA0 buffer size =   1.00 MiB",
			},
			want: []Logged{
				{Source: "llm_load_tensors", Device: "CPU", Kind: "model", MiB: 132.81, Printed: "132.81"},
				{Source: "llm_load_tensors", Device: "CUDA0", Kind: "model", MiB: 6695.84, Printed: "6695.84"},
			},
		},
		{
			name: "one of each kind",
			lines: []string{
				"load_tensors:   CPU_Mapped model buffer size =  8135.02 MiB",
				"llama_context:        CPU  output buffer size =     1.95 MiB",
				"llama_kv_cache:        CPU KV buffer size =  1024.00 MiB",
				"llama_memory_recurrent:        CPU RS buffer size =    28.50 MiB",
				"sched_reserve:        CPU compute buffer size =   517.03 MiB",
			},
			want: []Logged{
				{Source: "load_tensors", Device: "CPU_Mapped", Kind: "model", MiB: 8135.02, Printed: "8135.02"},
				{Source: "llama_context", Device: "CPU", Kind: "output", MiB: 1.95, Printed: "1.95"},
				{Source: "llama_kv_cache", Device: "CPU", Kind: "kv", MiB: 1024, Printed: "1024.00"},
				{Source: "llama_memory_recurrent", Device: "CPU", Kind: "rs", MiB: 28.5, Printed: "28.50"},
				{Source: "sched_reserve", Device: "CPU", Kind: "compute", MiB: 517.03, Printed: "517.03"},
			},
		},
		{
			name: "destructor checks and unrelated lines are skipped",
			lines: []string{
				"~llama_context:        CPU compute buffer size is 517.0312 MiB, matches expectation of 517.0312 MiB",
				"llama_kv_cache: size = 1024.00 MiB (  8192 cells,  32 layers,  1/1 seqs), K (f16):  512.00 MiB, V (f16):  512.00 MiB",
				"srv  log_server_r: request: GET /health 127.0.0.1 200",
				"",
			},
		},
		{
			name: "iswa caches name their kv buffers",
			lines: []string{
				"0.00.100.000 I llama_kv_cache_iswa: creating non-SWA KV cache, size = 4096 cells",
				"0.00.100.001 I llama_kv_cache:      CUDA0 KV buffer size =   112.00 MiB",
				"0.00.100.002 I llama_kv_cache_iswa: creating     SWA KV cache, size = 1536 cells",
				"0.00.100.003 I llama_kv_cache:      CUDA0 KV buffer size =    42.00 MiB",
				"0.00.100.004 I sched_reserve:      CUDA0 compute buffer size =   300.00 MiB",
			},
			want: []Logged{
				{Source: "llama_kv_cache", Device: "CUDA0", Kind: "kv", Cache: "non-SWA", MiB: 112, Printed: "112.00"},
				{Source: "llama_kv_cache", Device: "CUDA0", Kind: "kv", Cache: "SWA", MiB: 42, Printed: "42.00"},
				{Source: "sched_reserve", Device: "CUDA0", Kind: "compute", MiB: 300, Printed: "300.00"},
			},
		},
		{
			name:  "unknown phrase kept in snake case",
			lines: []string{"load_tensors:   CUDA0 moe placement buffer size =    10.00 MiB"},
			want:  []Logged{{Source: "load_tensors", Device: "CUDA0", Kind: "moe_placement", MiB: 10, Printed: "10.00"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseLog(tt.lines); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestLastLoad(t *testing.T) {
	lines := []string{
		// A virtual load (llama-server's fit), then the real one.
		"load_tensors:   CPU_Mapped model buffer size =  4685.30 MiB",
		"llama_kv_cache:        CPU KV buffer size =   512.00 MiB",
		"load_tensors:   CPU_Mapped model buffer size =  4685.30 MiB",
		"load_tensors:        CUDA0 model buffer size =  1000.00 MiB",
		"llama_kv_cache:      CUDA0 KV buffer size =   256.00 MiB",
		"sched_reserve:      CUDA0 compute buffer size =   300.00 MiB",
	}
	got := LastLoad(ParseLog(lines))
	if len(got) != 4 || got[0].Printed != "4685.30" || got[1].Device != "CUDA0" || got[2].Printed != "256.00" {
		t.Errorf("last load %+v, want the four lines from the second model buffer on", got)
	}
	if one := ParseLog(lines[2:]); len(LastLoad(one)) != len(one) {
		t.Error("a log of one load lost lines")
	}
}

func TestLastLoads(t *testing.T) {
	l := func(kind, dev string) Logged { return Logged{Kind: kind, Device: dev} }
	// A virtual fit load, the model's load, then its draft's with its
	// context.
	log := []Logged{
		l("model", "CPU_Mapped"), l("kv", "CPU"),
		l("model", "CPU_Mapped"), l("model", "CUDA0"), l("kv", "CUDA0"), l("compute", "CUDA0"),
		l("model", "CUDA0"), l("kv", "CUDA0"), l("kv", "CUDA0"), l("compute", "CUDA0"),
	}
	cases := []struct{ n, from int }{{1, 6}, {2, 2}, {3, 0}, {9, 0}}
	for _, c := range cases {
		if got := LastLoads(log, c.n); len(got) != len(log)-c.from {
			t.Errorf("last %d loads: %d lines, want %d", c.n, len(got), len(log)-c.from)
		}
	}
	if got := LastLoad(log); len(got) != 4 {
		t.Errorf("last load: %d lines, want the draft's 4", len(got))
	}
	if got := LastLoads([]Logged{l("kv", "CPU")}, 1); len(got) != 1 {
		t.Errorf("a log without model lines: %d lines kept, want all", len(got))
	}
}

// ParseLog reads any text without failing, and every buffer it reports
// carries the figure it printed.
func FuzzParseLog(f *testing.F) {
	f.Add("load_tensors:   CPU_Mapped model buffer size =  8135.02 MiB\nllama_kv_cache: creating non-SWA KV cache, size = 4096 cells\nllama_kv_cache:        CPU KV buffer size =  1024.00 MiB")
	f.Add("llm_load_tensors:      CUDA0 buffer size =   6695.84 MiB")
	f.Add("0.00.368.240 I llama_new_context_with_model:      CUDA0 compute buffer size =    16,00 MiB")
	f.Fuzz(func(t *testing.T, text string) {
		for _, l := range ParseLog(strings.Split(text, "\n")) {
			v, err := strconv.ParseFloat(l.Printed, 64)
			if err != nil || v != l.MiB || l.Kind == "" || l.Device == "" || l.Source == "" {
				t.Fatalf("%+v from %q", l, text)
			}
		}
	})
}

// TestParseLogDraft holds ParseLog to the harness's reading of the
// llama-server loads with a speculative draft context: the model's
// buffers, then the draft's, marked as the draft's, its compute buffer
// once (the last of its two reserves).
func TestParseLogDraft(t *testing.T) {
	cases, err := conformance.Load(filepath.Join("..", "conformance", "testdata", "server"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cases {
		if c.Figures.Draft == nil {
			continue
		}
		n++
		var want []Logged
		for model, bufs := range map[string][]conformance.Buffer{"": c.Figures.Buffers, "draft": c.Figures.Draft.Buffers} {
			for _, b := range bufs {
				want = append(want, Logged{Source: b.Source, Device: b.DeviceOrBufferType, Kind: b.Kind, Cache: b.Cache, MiB: b.MiB, Printed: b.Printed, Model: model})
			}
		}
		got := ParseLog(c.Log)
		key := func(l Logged) string {
			return l.Model + "/" + l.Kind + "/" + l.Device + "/" + l.Cache + "/" + l.Printed
		}
		if !reflect.DeepEqual(sortedKeys(got, key), sortedKeys(want, key)) {
			t.Errorf("%s:\n got %v\nwant %v", c.ID, sortedKeys(got, key), sortedKeys(want, key))
		}
	}
	if n < 10 {
		t.Fatalf("%d server cases with a draft context, want at least 10", n)
	}
}

func sortedKeys(ls []Logged, key func(Logged) string) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = key(l)
	}
	slices.Sort(out)
	return out
}

// TestParseLogDraftThenReload: a load after a draft context (llama-server
// loading the model again after sleeping) is the model's own, not the
// draft's; each draft context's compute buffer is the last of its
// reserves.
func TestParseLogDraftThenReload(t *testing.T) {
	log := []string{
		"srv    load_model: loading model 'm.gguf'",
		"load_tensors:   CPU_Mapped model buffer size =   784.52 MiB",
		"sched_reserve:        CPU compute buffer size =    46.30 MiB",
		"common_speculative_init_result: creating MTP draft context against the target model 'm.gguf'",
		"llama_kv_cache:        CPU KV buffer size =    16.00 MiB",
		"sched_reserve:        CPU compute buffer size =    27.01 MiB",
		"sched_reserve:        CPU compute buffer size =    27.02 MiB",
		"srv    load_model: loading model 'm.gguf'",
		"load_tensors:   CPU_Mapped model buffer size =   784.52 MiB",
		"sched_reserve:        CPU compute buffer size =    46.30 MiB",
	}
	var got []string
	for _, l := range ParseLog(log) {
		got = append(got, l.Model+"/"+l.Kind+"/"+l.Printed)
	}
	want := []string{"/model/784.52", "/compute/46.30", "draft/kv/16.00", "draft/compute/27.02", "/model/784.52", "/compute/46.30"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, l := range log {
		if !parseRelevant(l) && (strings.Contains(l, "load_model") || strings.Contains(l, "common_speculative")) {
			t.Errorf("a long-running server would drop %q, which ParseLog reads", l)
		}
	}
}
