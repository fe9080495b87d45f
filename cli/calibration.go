package cli

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/speed"
)

// samplesFor is the store of snapshot s's machine in the user's cache.
func samplesFor(env Env, s *hw.Snapshot) (speed.SampleStore, bool) {
	return speed.SamplesIn(cacheDir(env, "speed"), s)
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
	samples, err := st.Load()
	if err != nil && w != nil {
		if len(samples) == 0 {
			fmt.Fprintf(w, "headroom: %v; speed estimates use their priors\n", err)
		} else {
			fmt.Fprintf(w, "headroom: %v; the rest calibrate the estimates\n", err)
		}
	}
	if len(samples) == 0 {
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
	key := st.Path() + "\x00missing"
	if fi, err := os.Stat(st.Path()); err == nil {
		key = fmt.Sprintf("%s\x00%d\x00%d", st.Path(), fi.Size(), fi.ModTime().UnixNano())
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
	if err := st.Add(smp); err != nil {
		fmt.Fprintf(env.Stderr, "headroom: keeping the measurement: %v\n", err)
	}
}
