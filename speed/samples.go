package speed

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

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

// Load reads the kept samples; a missing file is none, a damaged one or
// another machine's is an error that says which file.
func (st SampleStore) Load() ([]Sample, error) {
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

// Add appends samples, keeping the newest maxSamples, and replaces the
// file whole (atomicfile). Two processes adding at once can lose one's
// runs, never damage the file.
func (st SampleStore) Add(more ...Sample) error {
	old, err := st.Load()
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

// Path is the store's file.
func (st SampleStore) Path() string { return st.path }

// Forget removes the store's file; a store with none is already empty.
func (st SampleStore) Forget() error {
	if err := os.Remove(st.path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
