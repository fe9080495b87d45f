package admission

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

// Key names everything an accounting depends on. A preview and the load
// that follows it compute the same Key; when any part differs, the
// accounting is computed again rather than reused.
type Key struct {
	// Artifacts identify the files: repository, commit, name and sha256,
	// or a local path with its size and modification time.
	Artifacts []string `json:"artifacts"`
	// Engine is the llama-server build ("b6789 (abc1234)"), or "" when the
	// preview did not know it yet.
	Engine string `json:"engine"`
	// Topology is the device topology: views, backends, domains and sizes,
	// not what is free.
	Topology string `json:"topology"`
	// Execution is the serving profile as llama-server flags.
	Execution []string `json:"execution"`
	// Capacity is the capacity policy: fit target, headless.
	Capacity string `json:"capacity"`
}

// String is the key as 64 hex digits.
func (k Key) String() string {
	b, _ := json.Marshal(k) // a struct of strings cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Topology describes a snapshot's devices and domains without the figures
// that change from one moment to the next (free memory, processes).
func Topology(s *hw.Snapshot) string {
	type view struct {
		Name, Backend, Type, Domain string
		Total                       int64
	}
	type domain struct {
		ID, Kind         string
		Capacity, Usable int64
	}
	var t struct {
		Views   []view
		Domains []domain
	}
	for _, v := range s.Devices {
		t.Views = append(t.Views, view{v.Name, v.Backend, v.Type, v.Domain, v.Total})
	}
	for _, d := range s.Domains {
		t.Domains = append(t.Domains, domain{d.ID, d.Kind, d.Capacity, d.Usable})
	}
	sort.Slice(t.Views, func(i, j int) bool { return t.Views[i].Name < t.Views[j].Name })
	sort.Slice(t.Domains, func(i, j int) bool { return t.Domains[i].ID < t.Domains[j].ID })
	b, _ := json.Marshal(t)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// Capacity describes a capacity policy.
func Capacity(fitTarget int64, headless bool) string {
	return fmt.Sprintf("fit-target=%d headless=%t", fitTarget, headless)
}

// Cache keeps accountings by Key. It is safe for concurrent use; its zero
// value is ready. It holds at most Max entries (64 when 0), dropping the
// oldest.
type Cache struct {
	Max int

	mu    sync.Mutex
	order []string
	by    map[string]*plan.Result
	hits  int
}

// Get returns the accounting stored under k.
func (c *Cache) Get(k Key) (*plan.Result, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.by[k.String()]
	if ok {
		c.hits++
	}
	return r, ok
}

// Put stores an accounting under k.
func (c *Cache) Put(k Key, r *plan.Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[string]*plan.Result{}
	}
	s := k.String()
	if _, ok := c.by[s]; !ok {
		c.order = append(c.order, s)
	}
	c.by[s] = r
	limit := c.Max
	if limit <= 0 {
		limit = 64
	}
	for len(c.order) > limit {
		delete(c.by, c.order[0])
		c.order = c.order[1:]
	}
}

// Hits counts the Gets that found an accounting.
func (c *Cache) Hits() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits
}
