// Package catalog is headroom's curated list of model configurations: which
// exact artifacts (repository, quantization, files) to consider, what their
// architecture is, what they can do, under which license, and how good they
// are by a cited measurement. It also pins those artifacts to immutable Hub
// commits (the lock, see lock.go) and ranks them for a machine (recommend.go).
//
// An entry identifies a configuration, not a friendly name: a variant is one
// quantized artifact, and a verdict is always about one variant on one plan.
package catalog

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/headroom-llm/headroom/internal/suggest"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/headroom-llm/headroom/source"
	"github.com/headroom-llm/headroom/synth"
)

//go:embed catalog.json
var catalogJSON []byte

// Catalog is the file catalog.json.
type Catalog struct {
	About []string `json:"about"`
	// Licenses are the license ids entries may use, with a description.
	Licenses map[string]string `json:"licenses"`
	Entries  []Entry           `json:"entries"`

	// models holds the planner inputs built for this catalog's variants:
	// derived headers take milliseconds each to synthesize, and they never
	// change.
	models *sync.Map // key -> *cachedModel
	// sum is the SHA-256 of the parsed file, part of recommend's cache
	// key.
	sum [32]byte
}

// Architecture classes.
const (
	ClassDense  = "dense"
	ClassMoE    = "moe"
	ClassHybrid = "hybrid" // attention mixed with recurrent or convolution layers
	ClassSSM    = "ssm"    // state-space layers only
)

// Capabilities an entry may declare.
var knownCapabilities = []string{"tools", "vision", "reasoning", "embedding", "rerank"}

// Entry is one model configuration family member: a checkpoint with its
// variants.
type Entry struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Family string `json:"family"`
	Class  Class  `json:"class"`
	// Config is the public configuration the hyperparameters come from.
	Config string `json:"config"`
	// Shape is the architecture as synth builds it, by value or by
	// reference to one of synth's built-in shapes.
	Shape ShapeSpec `json:"shape"`
	// CtxTrained is the trained (maximum supported) context in tokens.
	CtxTrained   int      `json:"ctx_trained"`
	Capabilities []string `json:"capabilities"`
	License      string   `json:"license"`
	// Quality is null when no cited measurement is known.
	Quality   *Quality   `json:"quality"`
	Variants  []Variant  `json:"variants"`
	Projector *Projector `json:"projector,omitempty"`
	Draft     *Draft     `json:"draft,omitempty"`
	Notes     []string   `json:"notes,omitempty"`
	// SupersededBy names the entry that replaced this one in its family
	// (Qwen3.6 after Qwen3.5): kept because people still run it, said so.
	SupersededBy string `json:"superseded_by,omitempty"`
}

// Class is the architecture class and parameter counts as the model card
// states them (in billions); the derived header's own counts are checked
// against them by the tests.
type Class struct {
	Kind         string   `json:"kind"`
	ParamsB      float64  `json:"params_b"`
	ActiveParams *float64 `json:"active_params_b,omitempty"`
}

// Quality is a score with its provenance.
type Quality struct {
	Score float64 `json:"score"`
	// Benchmark names the benchmark or leaderboard and its metric.
	Benchmark string `json:"benchmark"`
	Source    string `json:"source"` // URL
	Date      string `json:"date"`   // YYYY-MM-DD of the measurement or publication
	// MeasuredOn says which variant (precision, quantization) was measured.
	MeasuredOn string `json:"measured_on"`
}

// Variant is one quantized artifact of an entry.
type Variant struct {
	Quant string `json:"quant"`
	// Ref is the Hugging Face reference the lock resolves:
	// hf:OWNER/REPO:QUANT or hf:OWNER/REPO/FILE.gguf. It names no commit;
	// the commit comes from the lock.
	Ref string `json:"ref"`
}

// Projector is the multimodal projector an entry needs for vision. The
// lock resolves it the way llama.cpp's -hf picks one from the variant's
// repository.
type Projector struct {
	Note string `json:"note"`
}

// Draft is a reviewed speculative-decoding draft: another entry's variant
// whose tokenizer matches.
type Draft struct {
	Entry    string `json:"entry"`
	Quant    string `json:"quant"`
	Reviewed string `json:"reviewed"`
}

// Load parses the embedded catalog and validates it.
func Load() (*Catalog, error) { return Parse(catalogJSON) }

// Parse reads a catalog file and validates it.
func Parse(data []byte) (*Catalog, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Catalog
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c.models = &sync.Map{}
	c.sum = sha256.Sum256(data)
	return &c, nil
}

// ContentHash is the SHA-256 of the file the catalog was parsed from;
// zero for a catalog built by hand.
func (c *Catalog) ContentHash() [32]byte { return c.sum }

// Entry finds an entry by id.
func (c *Catalog) Entry(id string) *Entry {
	for i := range c.Entries {
		if c.Entries[i].ID == id {
			return &c.Entries[i]
		}
	}
	return nil
}

// Variant finds a variant of the entry by quantization.
func (e *Entry) Variant(quant string) *Variant {
	for i := range e.Variants {
		if strings.EqualFold(e.Variants[i].Quant, quant) {
			return &e.Variants[i]
		}
	}
	return nil
}

var (
	idRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`)
	dateRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
)

// Validate checks the rules every entry must follow: unique ids, a known
// class, license and capabilities, every variant's quantization a recipe
// headroom can derive, a Hugging Face reference without a pinned commit, a
// shape that builds, and provenance for every score.
func (c *Catalog) Validate() error {
	var errs []string
	bad := func(id, format string, args ...any) {
		errs = append(errs, id+": "+fmt.Sprintf(format, args...))
	}
	seen := map[string]bool{}
	for _, e := range c.Entries {
		id := e.ID
		if !idRE.MatchString(id) {
			bad(id, "id must be lower-case letters, digits, '.' and '-'")
		}
		if seen[id] {
			bad(id, "duplicate id")
		}
		seen[id] = true
		if e.Name == "" || e.Family == "" || e.Config == "" {
			bad(id, "name, family and config are required")
		}
		switch e.Class.Kind {
		case ClassDense, ClassHybrid, ClassSSM:
			if e.Class.ActiveParams != nil {
				bad(id, "only MoE entries have active parameters")
			}
		case ClassMoE:
			if e.Class.ActiveParams == nil || *e.Class.ActiveParams <= 0 || *e.Class.ActiveParams >= e.Class.ParamsB {
				bad(id, "an MoE entry needs active parameters between 0 and its total")
			}
		default:
			bad(id, "class %q is not dense, moe, hybrid or ssm", e.Class.Kind)
		}
		if e.Class.ParamsB <= 0 {
			bad(id, "params_b must be positive")
		}
		if by := e.SupersededBy; by != "" && (by == id || c.Entry(by) == nil) {
			bad(id, "superseded_by %q names no other entry", by)
		}
		if e.CtxTrained <= 0 {
			bad(id, "ctx_trained must be positive")
		}
		if _, ok := c.Licenses[e.License]; !ok {
			bad(id, "license %q is not in the catalog's license list", e.License)
		}
		for _, cp := range e.Capabilities {
			if !slices.Contains(knownCapabilities, cp) {
				bad(id, "capability %q is not one of %s", cp, strings.Join(knownCapabilities, ", "))
			}
		}
		if q := e.Quality; q != nil {
			if q.Benchmark == "" || q.Source == "" || !dateRE.MatchString(q.Date) || q.MeasuredOn == "" {
				bad(id, "a quality score needs benchmark, source, date (YYYY-MM-DD) and measured_on")
			}
		}
		s, err := e.Shape.Resolve()
		if err != nil {
			bad(id, "%v", err)
		} else if s.CtxTrain != e.CtxTrained {
			bad(id, "ctx_trained %d differs from the shape's %d", e.CtxTrained, s.CtxTrain)
		}
		if len(e.Variants) == 0 {
			bad(id, "no variants")
		}
		quants := map[string]bool{}
		for _, v := range e.Variants {
			if _, err := synth.ParseQuant(v.Quant); err != nil {
				bad(id, "variant %q: not a recipe headroom can derive (F16, Q8_0, Q4_K_M, Q5_K_M, Q6_K, MXFP4_MOE)", v.Quant)
			}
			if quants[v.Quant] {
				bad(id, "variant %q listed twice", v.Quant)
			}
			quants[v.Quant] = true
			r, err := source.ParseRef(v.Ref)
			switch {
			case err != nil:
				bad(id, "variant %s: %v", v.Quant, err)
			case r.Kind != source.KindHF:
				bad(id, "variant %s: ref must be an hf: reference", v.Quant)
			case r.Revision != source.DefaultRevision:
				bad(id, "variant %s: ref must not pin a revision; commits come from the lock", v.Quant)
			}
		}
	}
	for _, e := range c.Entries {
		if d := e.Draft; d != nil {
			de := c.Entry(d.Entry)
			switch {
			case de == nil:
				bad(e.ID, "draft entry %q is not in the catalog", d.Entry)
			case de.Variant(d.Quant) == nil:
				bad(e.ID, "draft %s has no variant %s", d.Entry, d.Quant)
			case d.Reviewed == "":
				bad(e.ID, "a draft needs a review note")
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("catalog: %d problems: %s", len(errs), strings.Join(errs, "; "))
	}
	return nil
}

// Find recognizes a catalog variant named ENTRY/QUANT, as recommend lists
// them and pull, serve and the API accept them. It returns nil without an
// error when ref is not of that form or names no entry (it may be a path
// or a Hub reference), and an error naming the variants there are when
// the entry exists but the quantization does not.
func (c *Catalog) Find(ref string) (*Entry, *Variant, error) {
	entry, quant, found := strings.Cut(ref, "/")
	if !found || strings.Contains(ref, ":") || strings.Contains(quant, "/") {
		return nil, nil, nil
	}
	e := c.Entry(entry)
	if e == nil {
		return nil, nil, nil
	}
	v := e.Variant(quant)
	if v == nil {
		var have []string
		for _, v := range e.Variants {
			have = append(have, v.Quant)
		}
		if s := suggest.Closest(strings.ToUpper(quant), have); s != "" {
			return nil, nil, fmt.Errorf("%s: the catalog has no %s variant of %s (did you mean %s/%s? it has %s)", ref, quant, entry, entry, s, strings.Join(have, ", "))
		}
		return nil, nil, fmt.Errorf("%s: the catalog has no %s variant of %s (it has %s)", ref, quant, entry, strings.Join(have, ", "))
	}
	return e, v, nil
}

// FindRef is Find for a reference a person or a request gave, which may
// also be a file: a path that exists on disk is a path, even if its name
// looks like a variant.
func (c *Catalog) FindRef(ref string) (*Entry, *Variant, error) {
	if _, err := os.Stat(ref); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	e, v, err := c.Find(ref)
	if e != nil || err != nil {
		return e, v, err
	}
	// Neither a file nor an entry: a mistyped entry is said as one, not
	// as a file that does not exist.
	entry, quant, found := strings.Cut(ref, "/")
	if !found || strings.ContainsAny(ref, ":\\") || strings.Contains(quant, "/") || strings.HasSuffix(quant, ".gguf") {
		return nil, nil, nil
	}
	var ids []string
	for _, e := range c.Entries {
		ids = append(ids, e.ID)
	}
	if s := suggest.Closest(entry, ids); s != "" {
		return nil, nil, fmt.Errorf("%s is neither a file nor a catalog variant: the catalog has no entry %s (did you mean %s/%s? headroom recommend --all lists them)", ref, entry, s, quant)
	}
	return nil, nil, nil
}

// Source is the reference a variant's file is read from: the locked
// commit and file when the lock pins it, else the catalog's reference.
func (l *LockFile) Source(e *Entry, v Variant) string {
	if pkg, _ := l.Lookup(e.ID, v); pkg != nil && len(pkg.Files) > 0 {
		return "hf:" + pkg.Repo + "/" + pkg.Files[0].Name + "@" + pkg.Commit
	}
	return v.Ref
}

// ServerArgs name a variant on a llama-server command line: -hf with the
// reference its file is read from, so llama.cpp downloads the same file.
func (l *LockFile) ServerArgs(e *Entry, v Variant) []string {
	return []string{"-hf", strings.TrimPrefix(l.Source(e, v), "hf:")}
}

// Capabilities are the capabilities an entry may declare, and a filter
// may ask for.
func Capabilities() []string { return slices.Clone(knownCapabilities) }

// Goals are the rankings Recommend knows.
func Goals() []string { return []string{GoalBalanced, GoalQuality, GoalSpeed, GoalContext} }

// LicenseIDs are the license ids entries use, sorted.
func (c *Catalog) LicenseIDs() []string { return slices.Sorted(maps.Keys(c.Licenses)) }

// FilterError is a filter value the catalog does not know: Filter is
// "capability" or "license", Allowed the values it knows.
type FilterError struct {
	Filter, Value string
	Allowed       []string
}

func (e *FilterError) Error() string {
	return fmt.Sprintf("%s %q is not one of %s", e.Filter, e.Value, strings.Join(e.Allowed, ", "))
}

// CheckFilters returns a *FilterError for the first capability or
// license that no entry could have: a filter that can match nothing is a
// mistake, not an empty answer.
func (c *Catalog) CheckFilters(capabilities, licenses []string) error {
	for _, v := range capabilities {
		if !slices.Contains(knownCapabilities, v) {
			return &FilterError{Filter: "capability", Value: v, Allowed: Capabilities()}
		}
	}
	ids := c.LicenseIDs()
	for _, v := range licenses {
		if !slices.Contains(ids, v) {
			return &FilterError{Filter: "license", Value: v, Allowed: ids}
		}
	}
	return nil
}
