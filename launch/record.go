package launch

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/plan"
)

// Record is what a load leaves behind: the plan and what llama.cpp
// allocated, buffer by buffer. Every record is a measurement of the real
// engine on a real machine, the data the accountant is calibrated with.
type Record struct {
	Time      time.Time             `json:"time"`
	Ref       string                `json:"ref"`
	Artifacts []string              `json:"artifacts"`
	Engine    string                `json:"engine"`
	Machine   string                `json:"machine_topology"`
	Flags     []string              `json:"flags"`
	Planned   []plan.Buffer         `json:"planned"`
	Logged    []engine.Logged       `json:"logged"`
	Diff      engine.Reconciliation `json:"reconciliation"`
	Summary   string                `json:"summary"`
}

// writeRecord saves a record as dir/TIME-PID.json and returns its path.
func writeRecord(dir string, r Record) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := fmt.Sprintf("%s-%d.json", r.Time.Format("20060102-150405.000"), os.Getpid())
	path := filepath.Join(dir, name)
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}
