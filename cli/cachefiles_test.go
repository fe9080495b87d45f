//go:build unix

package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/hw"
)

// TestCacheFilesDistrusted: a FIFO in place of a recommend-cache or
// bandwidth file is none, at once, not a read that waits for a writer;
// a kept bandwidth figure no memory gives is measured again.
func TestCacheFilesDistrusted(t *testing.T) {
	dir := t.TempDir()
	c := dirCache{dir: dir}
	if err := syscall.Mkfifo(c.path("entry"), 0o600); err != nil {
		t.Skipf("no FIFO: %v", err)
	}
	start := time.Now()
	if _, ok := c.Get("entry"); ok {
		t.Error("a FIFO was read as an entry")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the FIFO took %v", d)
	}
	b := bandwidthStore{c}
	for _, gbps := range []float64{math.MaxFloat64, -1, 1e9} {
		data, _ := json.Marshal(struct {
			Hardware string `json:"hardware"`
			hw.Measured
		}{"hw", hw.Measured{GBps: gbps, How: "forged"}})
		if err := os.WriteFile(filepath.Join(dir, bandwidthKey("hw")+".json"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if m, ok := b.Load("hw"); ok {
			t.Errorf("a kept %g GB/s was believed: %+v", gbps, m)
		}
	}
	b.Save("hw", hw.Measured{GBps: 44.9, How: "measured"})
	if m, ok := b.Load("hw"); !ok || m.GBps != 44.9 {
		t.Errorf("a measured figure: %+v, %v", m, ok)
	}
}
