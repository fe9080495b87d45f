// Package launch carries a model from a reference to a running server:
// resolve the reference to an exact artifact, assess it on this machine,
// ask the user's llama.cpp to project the plan, pull it into the store
// only once it fits, admit it again at load time
// beside what headroom already runs, start llama-server with the plan and
// declare it ready only after a real completion.
package launch

import (
	"context"
	"errors"
	"fmt"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/internal/units"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/source"
)

// Deps are what the steps need. Machine takes a fresh snapshot each time it
// is called; the pull and the load each ask for one.
type Deps struct {
	Client  *source.Client
	Catalog *catalog.Catalog
	Lock    *catalog.LockFile
	Machine func(ctx context.Context) (*hw.Snapshot, error)
	// Say receives the state a person follows and a line about it; nil
	// discards them.
	Say func(state, line string)
	// Engine is the llama-server build loads will use ("" before one is
	// found); it is part of every admission key.
	Engine string
	// Cache keeps accountings between a preview and its load; nil
	// computes every one.
	Cache *admission.Cache
	// FitParams is the llama-fit-params of the llama.cpp that will load
	// the model ("" when there is none): it projects the loads of an
	// architecture headroom does not model, and checks the plans of the
	// others (Preflight).
	FitParams string
}

func (d *Deps) say(state, format string, args ...any) {
	if d.Say != nil {
		d.Say(state, fmt.Sprintf(format, args...))
	}
}

// Model is a resolved reference: the exact artifact and its architecture.
type Model struct {
	// Ref is the reference as given.
	Ref string
	// Variant is ENTRY/QUANT when the reference named a catalog variant.
	Variant string
	Header  *source.Header
	Arch    *arch.Model
	// ArchErr is why the architecture cannot be modelled (Arch is nil).
	ArchErr error
	// Pinned is the lock's package when the catalog variant was locked.
	Pinned *catalog.Package
	// Companions are the projector and draft llama-server will load beside
	// the model (nil for none), and Draft the draft as resolved.
	Companions *plan.Companions
	Draft      *Model
	// ProjectorSHA256 is the projector's hash as the Hub lists it.
	ProjectorSHA256 string
}

// Local reports whether the model's files are already on this machine.
func (m *Model) Local() bool { return m.Header.Artifact.Kind == source.KindLocal }

// Identity lists each file as repository@commit/name#sha256, or a local
// file as its path and size: what an admission key is built from.
func (m *Model) Identity() []string {
	a := m.Header.Artifact
	var out []string
	for _, f := range a.Files {
		if m.Local() {
			out = append(out, fmt.Sprintf("%s#%d", f.Path, f.Size))
			continue
		}
		out = append(out, fmt.Sprintf("%s@%s/%s#%s", a.Repo, a.Commit, f.Name, f.SHA256))
	}
	if c := m.Companions; c != nil && c.Projector != nil {
		out = append(out, fmt.Sprintf("mmproj %s@%s/%s#%s", a.Repo, a.Commit, a.MMProj.Name, m.ProjectorSHA256))
	}
	if m.Draft != nil && m.Companions != nil && m.Companions.Draft != nil {
		for _, id := range m.Draft.Identity() {
			out = append(out, "draft "+id)
		}
	}
	return out
}

// Resolve turns a reference into a Model: a catalog variant ENTRY/QUANT
// (pinned to its locked commit when the lock has it), a local GGUF, a URL,
// or hf:OWNER/REPO[:QUANT|/FILE][@REV]. Only the headers are read: the
// model's, and those of the projector beside it and the draft the catalog
// reviewed for it (Companions).
func (d *Deps) Resolve(ctx context.Context, ref string) (*Model, error) {
	return d.resolve(ctx, ref, true)
}

func (d *Deps) resolve(ctx context.Context, ref string, withCompanions bool) (*Model, error) {
	ctx = d.Client.OneBudget(ctx)
	d.say("resolving", "%s", ref)
	m := &Model{Ref: ref}
	open := ref
	if v, pinned, ok, err := d.variant(ref); err != nil {
		return nil, err
	} else if ok {
		m.Variant, m.Pinned, open = ref, pinned, v
	}
	h, err := d.Client.Open(ctx, open)
	if err != nil {
		return nil, err
	}
	m.Header = h
	if m.Pinned != nil {
		if err := checkPinned(m.Pinned, h.Artifact); err != nil {
			return nil, err
		}
	}
	m.Arch, m.ArchErr = arch.FromGGUF(h.Model)
	if m.ArchErr != nil {
		var inc *arch.Incompatible
		if !errors.As(m.ArchErr, &inc) {
			return nil, m.ArchErr
		}
	}
	a := h.Artifact
	if a.Commit != "" {
		d.say("resolving", "%s is %s@%s, %d file(s), %s", ref, a.Repo, a.Commit[:12], len(a.Files), units.GiB(h.Model.Size()))
	}
	if withCompanions && m.Arch != nil {
		if err := d.companions(ctx, m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// variant recognizes ENTRY/QUANT (catalog.FindRef: a path on disk is a
// path) and names the file to open: the locked one when the lock pins it.
func (d *Deps) variant(ref string) (open string, pinned *catalog.Package, ok bool, err error) {
	if d.Catalog == nil {
		return "", nil, false, nil
	}
	e, v, err := d.Catalog.FindRef(ref)
	if e == nil || err != nil {
		return "", nil, false, err
	}
	if pkg, _ := d.Lock.Lookup(e.ID, *v); pkg != nil && len(pkg.Files) > 0 {
		pinned = pkg
	}
	return d.Lock.Source(e, *v), pinned, true, nil
}

// checkPinned compares what the Hub lists now with what the lock recorded.
// A commit names fixed content, so a difference means the lock or the Hub
// is wrong, and nothing should be downloaded on either's word.
func checkPinned(p *catalog.Package, a *source.Artifact) error {
	if len(a.Files) != len(p.Files) {
		return fmt.Errorf("%s@%s: the lock lists %d file(s), the Hub %d", p.Repo, p.Commit, len(p.Files), len(a.Files))
	}
	for i, f := range p.Files {
		g := a.Files[i]
		if g.Name != f.Name || g.Size != f.Size || (f.SHA256 != "" && g.SHA256 != f.SHA256) {
			return fmt.Errorf("%s@%s/%s: the lock records %d bytes sha256 %s, the Hub lists %s, %d bytes sha256 %s",
				p.Repo, p.Commit, f.Name, f.Size, f.SHA256, g.Name, g.Size, g.SHA256)
		}
	}
	return nil
}
