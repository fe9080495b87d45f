package launch

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/headroom-llm/headroom/internal/units"
	"github.com/headroom-llm/headroom/source"
	"github.com/headroom-llm/headroom/store"
)

// Pulled is a model whose files are in the store (or were local already).
type Pulled struct {
	// Path is the file to give llama-server's -m: the first shard.
	Path string
	// Manifest is nil for a local model.
	Manifest *store.Manifest
	// Overridden says what --force overrode; empty when nothing was.
	Overridden string
}

// Pull downloads an assessed model into the store. A model the assessment
// refused (assessErr, a *NotFit) is not downloaded unless force is set, in
// which case Overridden says what was overridden. Every file is verified
// against the sha256 the Hub (or the lock) lists before it is installed.
func (d *Deps) Pull(ctx context.Context, m *Model, assessErr error, st *store.Store, force bool) (*Pulled, error) {
	p := &Pulled{}
	if assessErr != nil {
		var nf *NotFit
		if !errors.As(assessErr, &nf) || !force {
			return nil, assessErr
		}
		p.Overridden = fmt.Sprintf("--force: pulling although %s", nf.Error())
		d.say("assessing", "%s", p.Overridden)
	}
	if m.Local() {
		p.Path = m.Header.Artifact.Files[0].Path
		d.say("downloading", "%s is a local file; nothing to download", p.Path)
		return p, nil
	}
	a := m.Header.Artifact
	art := store.Artifact{Ref: m.Ref, Repo: a.Repo, Commit: a.Commit}
	for _, f := range a.Files {
		art.Files = append(art.Files, storeFile(f))
	}
	if a.MMProj != nil && a.MMProj.Size >= 0 {
		art.Extra = append(art.Extra, storeFile(*a.MMProj))
	}
	need, err := st.Need(art)
	if err != nil {
		return nil, err
	}
	if need == 0 {
		d.say("downloading", "already in the store: %s", m.Ref)
	} else {
		d.say("downloading", "%s to fetch into %s", units.GiB(need), st.Root)
	}
	man, err := st.Pull(ctx, art)
	if err != nil {
		return nil, err
	}
	p.Manifest = man
	p.Path = man.Files[0].Path
	for _, f := range append(append([]store.Installed(nil), man.Files...), man.Extra...) {
		if f.Altered != "" {
			d.say("downloading", "%s: the installed blob had been altered (its sha256 was %s, not %s); it was removed and downloaded again", f.Name, f.Altered, f.SHA256)
		}
		if !f.Verified {
			d.say("downloading", "%s: no sha256 was listed for it, so it is installed unverified (sha256 %s)", f.Name, f.SHA256)
		}
	}
	return p, nil
}

func storeFile(f source.ArtifactFile) store.File {
	return store.File{Name: f.Name, URL: f.URL, Size: f.Size, SHA256: f.SHA256}
}

// Draft names the speculative-decoding draft the catalog reviewed for the
// model's variant, as ENTRY/QUANT; false when the model is not a catalog
// variant or has none.
func (d *Deps) Draft(m *Model) (string, bool) {
	if m.Variant == "" || d.Catalog == nil {
		return "", false
	}
	entry, _, _ := strings.Cut(m.Variant, "/")
	e := d.Catalog.Entry(entry)
	if e == nil || e.Draft == nil {
		return "", false
	}
	return e.Draft.Entry + "/" + e.Draft.Quant, true
}
