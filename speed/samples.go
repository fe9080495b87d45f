package speed

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/atomicfile"
)

// maxSamples bounds what one machine keeps: the newest runs win, and a
// calibration fits the newest build's anyway.
const maxSamples = 500

// sampleFile is what a machine's measurements are kept as.
type sampleFile struct {
	Hardware string   `json:"hardware"`
	Samples  []Sample `json:"samples"`
}

// SampleStore keeps the llama-bench runs of one machine in a directory
// (the user's cache), under a hash of the probe's hardware key: a new
// DIMM or another card starts a new file.
type SampleStore struct {
	path     string
	hardware string
}

// SamplesIn is the store in dir of snapshot s's machine; ok is false for
// a machine that was not probed (a preset) or where no directory is
// known, which keep nothing.
func SamplesIn(dir string, s *hw.Snapshot) (SampleStore, bool) {
	if s == nil || s.Hardware == "" || dir == "" {
		return SampleStore{}, false
	}
	sum := sha256.Sum256([]byte(s.Hardware))
	return SampleStore{path: filepath.Join(dir, "samples-"+hex.EncodeToString(sum[:16])+".json"), hardware: s.Hardware}, true
}

// maxSampleBytes bounds the samples file read: maxSamples of them take
// well under a megabyte, and a file of gigabytes is refused before it is
// read.
const maxSampleBytes = 8 << 20

// Load reads the kept samples. A missing file is none. A file that is not
// a regular one (a FIFO would block the reader), is over maxSampleBytes,
// or another machine's is an error that names it; one that does not
// decode is set aside (PATH.damaged) and named. Samples no measurement
// could give (a figure that is not finite, a decode rate above the
// machine's bandwidth ceiling) are left out, and the error says which,
// beside the samples that stand.
func (st SampleStore) Load() ([]Sample, error) {
	data, err := atomicfile.ReadFile(st.path, maxSampleBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("speed measurements: %w (remove the file to start afresh)", err)
	}
	var f sampleFile
	if err := json.Unmarshal(data, &f); err != nil {
		aside := "set aside as " + st.path + ".damaged"
		if serr := atomicfile.SetAside(st.path); serr != nil {
			aside = "remove the file to start afresh"
		}
		return nil, fmt.Errorf("reading speed measurements %s: %w (%s)", st.path, err, aside)
	}
	if f.Hardware != st.hardware {
		return nil, fmt.Errorf("speed measurements %s are of %q, not this machine (%q)", st.path, f.Hardware, st.hardware)
	}
	var kept []Sample
	var dropped []string
	for i, smp := range f.Samples {
		if err := smp.plausible(); err != nil {
			dropped = append(dropped, fmt.Sprintf("sample %d (%s): %v", i+1, smp.Model, err))
			continue
		}
		kept = append(kept, smp)
	}
	if len(dropped) > 0 {
		return kept, fmt.Errorf("speed measurements %s: %d left out: %s", st.path, len(dropped), strings.Join(dropped, "; "))
	}
	return kept, nil
}

// ceilingSlack is how far over the bandwidth ceiling a measured decode
// rate may be before it is refused. A small model's weights can sit in
// part in a CPU's last-level cache (96 MiB on some), and a bandwidth
// probe of two threads reads less than the memory can give, so a real
// run may beat the ceiling; by four times, none does.
const ceilingSlack = 4

// plausible refuses a sample no measurement could give: a figure that is
// not finite or below zero, or a generation rate above the rate at which
// every device reads its bytes at its full bandwidth.
func (s Sample) plausible() error {
	for _, v := range []float64{s.FullBandwidthMs, s.DecodeTPS, s.DecodeStddev, s.DecodeBest, s.PrefillTPS, s.PrefillStddev, s.PrefillBest} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("a figure of %v", v)
		}
	}
	for d, bw := range s.Bandwidths {
		if math.IsNaN(bw) || math.IsInf(bw, 0) || bw <= 0 {
			return fmt.Errorf("a bandwidth of %v GB/s for %s", bw, d)
		}
	}
	if s.FullBandwidthMs > 0 {
		ceiling := 1000 / s.FullBandwidthMs
		if best := max(s.DecodeBest, s.DecodeTPS); best > ceiling*ceilingSlack {
			return fmt.Errorf("%.1f tokens/s decoded, more than %g times the %.1f tokens/s at which the devices read its bytes at full bandwidth", best, float64(ceilingSlack), ceiling)
		}
	}
	return nil
}

// Add appends samples, keeping the newest maxSamples, and replaces the
// file whole (atomicfile). Two processes adding at once can lose one's
// runs, never damage the file.
func (st SampleStore) Add(more ...Sample) error {
	old, err := st.Load()
	if err != nil && old == nil {
		return err
	}
	all := append(old, more...)
	if len(all) > maxSamples {
		all = all[len(all)-maxSamples:]
	}
	data, err := json.MarshalIndent(sampleFile{Hardware: st.hardware, Samples: all}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(st.path, data)
}

// Path is the store's file.
func (st SampleStore) Path() string { return st.path }

// Forget removes the store's file; a store with none is already empty.
func (st SampleStore) Forget() error {
	if err := os.Remove(st.path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
