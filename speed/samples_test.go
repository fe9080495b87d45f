//go:build unix

package speed

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/atomicfile"
)

// TestSampleStoreDistrusts: the samples file is anyone's who can write
// the cache: a FIFO in its place is refused within a second, a file over
// the bound before it is read, a file that does not decode is set aside,
// and samples no measurement gives (a decode rate above the bandwidth
// ceiling, a figure that is not finite) are left out with the reason
// while the rest stand.
func TestSampleStoreDistrusts(t *testing.T) {
	snap := &hw.Snapshot{Hardware: "test machine"}
	dir := t.TempDir()
	st, ok := SamplesIn(dir, snap)
	if !ok {
		t.Fatal("no store")
	}
	good := Sample{Model: "good", FullBandwidthMs: 40, DecodeTPS: 20, DecodeBest: 21} // ceiling 25 tokens/s
	fast := Sample{Model: "forged", FullBandwidthMs: 40, DecodeTPS: 1e9, DecodeBest: 1e9}
	write := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(st.Path(), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(sampleFile{Hardware: "test machine", Samples: []Sample{good, fast}})
	got, err := st.Load()
	if len(got) != 1 || got[0].Model != "good" || err == nil || !strings.Contains(err.Error(), "more than 4 times the 25.0 tokens/s") {
		t.Errorf("a forged sample: kept %v, %v; want it left out with the reason", got, err)
	}
	// JSON cannot say +Inf; a huge figure stands in for it.
	write(map[string]any{"hardware": "test machine", "samples": []map[string]any{{"model": "huge", "decode_tokens_per_s": math.MaxFloat64, "full_bandwidth_ms": 1}}})
	if got, err := st.Load(); len(got) != 0 || err == nil {
		t.Errorf("1.8e308 tokens/s: kept %v, %v", got, err)
	}
	os.WriteFile(st.Path(), []byte("{not json"), 0o600)
	if _, err := st.Load(); err == nil || !strings.Contains(err.Error(), "set aside") {
		t.Errorf("damaged: %v", err)
	}
	if _, err := os.Stat(st.Path() + ".damaged"); err != nil {
		t.Errorf("the damaged file was not set aside: %v", err)
	}
	big := make([]byte, maxSampleBytes+1)
	os.WriteFile(st.Path(), big, 0o600)
	if _, err := st.Load(); !errors.Is(err, atomicfile.ErrTooLarge) {
		t.Errorf("%d bytes: %v", len(big), err)
	}
	os.Remove(st.Path())
	if err := syscall.Mkfifo(filepath.Join(dir, filepath.Base(st.Path())), 0o600); err != nil {
		t.Skipf("no FIFO: %v", err)
	}
	start := time.Now()
	if _, err := st.Load(); !errors.Is(err, atomicfile.ErrNotRegular) {
		t.Errorf("FIFO: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the FIFO took %v to refuse", d)
	}
}
