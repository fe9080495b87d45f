package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/internal/ggufattack"
	"github.com/headroom-llm/headroom/source"
)

// headerOf parses a builder's header as inspect would see it.
func headerOf(t *testing.T, r io.ReaderAt, size int64) *source.Header {
	t.Helper()
	f, err := gguf.Read(r, size)
	if err != nil {
		t.Fatal(err)
	}
	m, err := gguf.NewModel(f)
	if err != nil {
		t.Fatal(err)
	}
	return &source.Header{Artifact: &source.Artifact{Ref: "x.gguf", Kind: source.KindLocal,
		Files: []source.ArtifactFile{{Name: "x.gguf", Size: size}}}, Model: m}
}

// TestFullJSONIsTheReport: the streamed --full output is byte for byte
// what encoding/json writes of the whole report, over every value type,
// escapes, multi-byte characters across the 64 KiB pieces, NaN and
// nested arrays.
func TestFullJSONIsTheReport(t *testing.T) {
	b := gguf.NewBuilder()
	b.Set("general.architecture", gguf.StringValue("llama"))
	b.Set("general.name", gguf.StringValue(strings.Repeat("é<&>\"\\\x00\x1b\xff\b\f\n\r\t\u2028\u2029\x7f", 20000)))
	b.Set("general.file_type", gguf.Uint32Value(15))
	b.Set("a.f32", gguf.Float32Value(1e-5)).Set("a.f64", gguf.Float64Value(math.NaN()))
	b.Set("a.i8", gguf.Int8Value(-3)).Set("a.u64", gguf.Uint64Value(math.MaxUint64)).Set("a.bool", gguf.BoolValue(true))
	b.Set("a.strings", gguf.StringsValue([]string{"", "x", strings.Repeat("日本", 40000)}))
	b.Set("a.ints", gguf.Int32sValue([]int32{-1, 0, math.MaxInt32}))
	b.Set("a.floats", gguf.Float32sValue([]float32{0.1, float32(math.Inf(1)), 3}))
	b.Set("a.bools", gguf.BoolsValue([]bool{true, false}))
	b.Set("a.empty", gguf.StringsValue(nil))
	inner, err := gguf.ArrayOf(gguf.Int32, gguf.Int32Value(1), gguf.Int32Value(2))
	if err != nil {
		t.Fatal(err)
	}
	nested, err := gguf.ArrayOf(gguf.Array, inner, inner)
	if err != nil {
		t.Fatal(err)
	}
	b.Set("a.nested", nested)
	if err := b.AddTensor("token_embd.weight", gguf.TypeF32, []uint64{8, 4}, nil); err != nil {
		t.Fatal(err)
	}
	r, size, err := b.ReaderAt()
	if err != nil {
		t.Fatal(err)
	}
	h := headerOf(t, r, size)
	var want, got bytes.Buffer
	if err := printJSON(&want, inspectReport(h, -1, -1)); err != nil {
		t.Fatal(err)
	}
	if err := printFullJSON(context.Background(), &got, h); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		g, w := got.String(), want.String()
		i := 0
		for i < len(g) && i < len(w) && g[i] == w[i] {
			i++
		}
		t.Fatalf("streamed output differs at byte %d of %d (want %d):\ngot  %.200q\nwant %.200q", i, len(g), len(w), g[max(i-40, 0):], w[max(i-40, 0):])
	}
}

// TestFullJSONStaysSmall: inspect --json --full of the 250 MiB string took
// 7.45 GB, of the 250 MiB uint8 array 10.4 GB with no output after 88 s
// (issue #30, item 3). Streamed, the string prints whole and the array
// prints from the start, each allocating nothing measurable beyond the
// parsed header, and a cancelled context (Ctrl-C) stops the output within
// 1 s. The array's 2.9 GB of JSON take about 20 s, so it is cut off by a
// cancel after 2 s, its rate logged.
func TestFullJSONStaysSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("parses 250 MiB headers")
	}
	for _, tc := range []struct {
		name   string
		g      *ggufattack.File
		cancel time.Duration // 0: print it all
	}{
		{"250 MiB string", ggufattack.BigString(), 0},
		{"250 MiB uint8 array", ggufattack.BigBytes(), 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := headerOf(t, tc.g, tc.g.Size)
			ctx := context.Background()
			if tc.cancel > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.cancel)
				defer cancel()
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			cw := &countWriter{}
			start := time.Now()
			err := printFullJSON(ctx, cw, h)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			n := after.TotalAlloc - before.TotalAlloc
			t.Logf("%s: %d bytes printed in %v, %d KiB allocated: %v", tc.name, cw.n, took.Round(time.Millisecond), n>>10, err)
			if n > 16<<20 {
				t.Errorf("allocated %d bytes printing; want under 16 MiB", n)
			}
			switch {
			case tc.cancel == 0 && err != nil:
				t.Fatal(err)
			case tc.cancel == 0 && cw.n < ggufattack.BigValue:
				t.Errorf("printed %d bytes; want the value whole", cw.n)
			case tc.cancel > 0 && !errors.Is(err, context.DeadlineExceeded):
				t.Errorf("printFullJSON: %v; want it stopped by the context", err)
			case tc.cancel > 0 && took > tc.cancel+time.Second:
				t.Errorf("stopped after %v, %v after the cancel; want within 1 s", took, took-tc.cancel)
			case tc.cancel > 0 && cw.n < 1<<20:
				t.Errorf("printed %d bytes in %v; want output from the start", cw.n, took)
			}
		})
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }
