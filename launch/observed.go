package launch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/plan"
)

// Observed is what a ready load allocated beyond its plan, kept under the
// load's key (engine build, artifacts, device topology, flags, capacity
// policy): a later load of the same key is admitted with it added, so
// what one run taught is not planned away again. Groups that came in
// under the plan are not kept: the plan's figure is the safe one there.
type Observed struct {
	Key  string    `json:"key"`
	Time time.Time `json:"time"`
	// Record is the run's record, where the logged figures are.
	Record string `json:"record,omitempty"`
	// Rows are the groups llama.cpp allocated more for than planned.
	Rows []engine.Row `json:"rows"`
}

// maxObserved bounds an observation file read back.
const maxObserved = 1 << 20

func observedPath(dir string, key admission.Key) string {
	return filepath.Join(dir, key.String()+".json")
}

// observe keeps what a load allocated beyond its plan, or forgets an
// older observation of the key when the plan held this time.
func observe(dir string, key admission.Key, rec engine.Reconciliation, record string) error {
	var over []engine.Row
	for _, r := range append(slices.Clone(rec.Rows), rec.LoggedOnly...) {
		if r.DiffBytes > 0 && !r.Within {
			over = append(over, r)
		}
	}
	path := observedPath(dir, key)
	if len(over) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(Observed{Key: key.String(), Time: time.Now().UTC(), Record: record, Rows: over}, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// observed reads the observation of key; nil when there is none.
func observed(dir string, key admission.Key) (*Observed, error) {
	path := observedPath(dir, key)
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if st.Size() > maxObserved {
		return nil, fmt.Errorf("observation %s: %d bytes, expected at most %d", path, st.Size(), maxObserved)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var o Observed
	if err := json.Unmarshal(data, &o); err != nil {
		return nil, fmt.Errorf("observation %s: %w", path, err)
	}
	if o.Key != key.String() {
		return nil, fmt.Errorf("observation %s: expected key %s, found %s", path, key.String(), o.Key)
	}
	for _, r := range o.Rows {
		if r.DiffBytes <= 0 || r.DiffBytes > 1<<40 {
			return nil, fmt.Errorf("observation %s: %s %s adds %d bytes, expected a positive figure under 1 TiB", path, r.BufferType, r.Kind, r.DiffBytes)
		}
	}
	return &o, nil
}

// apply returns r with a buffer added for each group the observed run
// allocated more for, on the device that buffer type belongs to.
func (o *Observed) apply(r *plan.Result, cpu string) *plan.Result {
	return withBeyond(r, cpu, o.Rows, func(row engine.Row) string {
		return fmt.Sprintf("observed: a load of this key on %s allocated %.2f MiB more than planned (%s)", o.Time.Format(time.DateOnly), float64(row.DiffBytes)/(1<<20), o.Record)
	})
}

// withBeyond returns r with a buffer of each row's DiffBytes added, on
// the device the row's buffer type belongs to (the CPU when no planned
// buffer names it), noted by note.
func withBeyond(r *plan.Result, cpu string, rows []engine.Row, note func(engine.Row) string) *plan.Result {
	out := *r
	out.Buffers = slices.Clone(r.Buffers)
	for _, row := range rows {
		dev := cpu
		for _, b := range r.Buffers {
			if b.BufferType == row.BufferType || b.Device == row.BufferType {
				dev = b.Device
				break
			}
		}
		out.Buffers = append(out.Buffers, plan.Buffer{Device: dev, BufferType: row.BufferType, Kind: plan.BufferKind(row.Kind), Bytes: row.DiffBytes, Note: note(row)})
	}
	return &out
}
