package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/headroom-llm/headroom/internal/atomicfile"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/speed"
)

// maxSamples bounds what one machine keeps: the newest runs win, and a
// calibration fits the newest build's anyway.
const maxSamples = 500

// sampleFile is what a machine's measurements are kept as.
type sampleFile struct {
	Hardware string         `json:"hardware"`
	Samples  []speed.Sample `json:"samples"`
}

// sampleStore keeps the llama-bench runs of one machine in the user's
// cache directory, under a hash of the probe's hardware key: a new DIMM
// or another card starts a new file.
type sampleStore struct {
	path     string
	hardware string
}

// samplesFor is the store of snapshot s's machine; ok is false for a
// machine that was not probed (a preset) or where no cache directory is
// known, which keep nothing.
func samplesFor(env Env, s *hw.Snapshot) (sampleStore, bool) {
	dir := cacheDir(env, "speed")
	if s == nil || s.Hardware == "" || dir == "" {
		return sampleStore{}, false
	}
	sum := sha256.Sum256([]byte(s.Hardware))
	return sampleStore{path: filepath.Join(dir, "samples-"+hex.EncodeToString(sum[:16])+".json"), hardware: s.Hardware}, true
}

// load reads the kept samples; a missing file is none, a damaged one or
// another machine's is an error that says which file.
func (st sampleStore) load() ([]speed.Sample, error) {
	data, err := os.ReadFile(st.path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f sampleFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("reading speed measurements %s: %w (remove the file to start afresh)", st.path, err)
	}
	if f.Hardware != st.hardware {
		return nil, fmt.Errorf("speed measurements %s are of %q, not this machine (%q)", st.path, f.Hardware, st.hardware)
	}
	return f.Samples, nil
}

// add appends samples, keeping the newest maxSamples, and replaces the
// file whole (atomicfile). Two processes adding at once can lose one's
// runs, never damage the file.
func (st sampleStore) add(more ...speed.Sample) error {
	old, err := st.load()
	if err != nil {
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

// machineCalibration is this machine's fitted speed parameters, nil when
// the snapshot is not of a probed machine or nothing has been measured
// enough. A store that cannot be read is said on w, once, and ignored:
// the estimate falls back to its priors.
func machineCalibration(env Env, s *hw.Snapshot, w io.Writer) *speed.Calibration {
	st, ok := samplesFor(env, s)
	if !ok {
		return nil
	}
	samples, err := st.load()
	if err != nil {
		if w != nil {
			fmt.Fprintf(w, "headroom: %v; speed estimates use their priors\n", err)
		}
		return nil
	}
	return speed.Fit(speed.Current(samples, s), "")
}

// calibrationMemo is machineCalibration for a long-running server: the
// fit is done again only when the kept file changes (its size or time),
// not on every request that lists or ranks models.
type calibrationMemo struct {
	env  Env
	mu   sync.Mutex
	key  string
	last *speed.Calibration
}

func (c *calibrationMemo) get(s *hw.Snapshot) *speed.Calibration {
	st, ok := samplesFor(c.env, s)
	if !ok {
		return nil
	}
	key := st.path + "\x00missing"
	if fi, err := os.Stat(st.path); err == nil {
		key = fmt.Sprintf("%s\x00%d\x00%d", st.path, fi.Size(), fi.ModTime().UnixNano())
	}
	// The bandwidth figures decide which runs count (speed.Current).
	for _, d := range s.Domains {
		key += fmt.Sprintf("\x00%s=%g", d.ID, d.BandwidthGBps)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if key != c.key {
		c.key, c.last = key, machineCalibration(c.env, s, nil)
	}
	return c.last
}

// keepSample adds a --bench measurement of plan p of model m to this
// machine's samples when it can teach a backend's parameters (all its
// work on one backend). weights is the twin's kind, "" for the model's
// own file: Fit uses real and random weights only. It says nothing when it cannot: most plans that
// split layers between a GPU and the CPU cannot.
func keepSample(env Env, name, weights string, m *arch.Model, p plan.Profile, s *hw.Snapshot, meas *speed.Measured) {
	st, ok := samplesFor(env, s)
	if !ok || m == nil || meas == nil {
		return
	}
	cpu, gpus := plan.Devices(s)
	r, err := plan.Place(m, p, cpu, gpus)
	if err != nil {
		return
	}
	smp, err := speed.NewSample(name, m, r, s, meas)
	if err != nil {
		return
	}
	smp.Weights = weights
	if err := st.add(smp); err != nil {
		fmt.Fprintf(env.Stderr, "headroom: keeping the measurement: %v\n", err)
	}
}
