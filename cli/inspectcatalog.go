package cli

import (
	"fmt"
	"strings"

	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/source"
	"github.com/headroom-llm/headroom/synth"
)

// catalogHeader is the header fit and plan read for a catalog variant,
// with no network: the locked file's header as the lock keeps it, else
// one derived from the entry's public configuration and quant recipe. It
// says which in its second result.
func catalogHeader(ref string, lock *catalog.LockFile, e *catalog.Entry, v catalog.Variant) (*source.Header, string, error) {
	if pkg, _ := lock.Lookup(e.ID, v); pkg != nil {
		m, err := pkg.Inputs.Model()
		if err != nil {
			return nil, "", fmt.Errorf("%s: the lock's header: %w", ref, err)
		}
		a := &source.Artifact{Ref: ref, Kind: source.KindHF, Repo: pkg.Repo, Commit: pkg.Commit, QuantTag: v.Quant}
		for _, f := range pkg.Files {
			a.Files = append(a.Files, source.ArtifactFile{Name: f.Name, Size: f.Size})
		}
		return &source.Header{Artifact: a, Model: m}, "the locked file's header, as the catalog lock keeps it", nil
	}
	s, err := e.Shape.Resolve()
	if err != nil {
		return nil, "", fmt.Errorf("%s: the entry's shape: %w", ref, err)
	}
	m, err := catalog.DeriveModel(s, synth.Quant(v.Quant))
	if err != nil {
		return nil, "", fmt.Errorf("%s: deriving its header: %w", ref, err)
	}
	repo, _, _ := strings.Cut(strings.TrimPrefix(v.Ref, "hf:"), ":")
	a := &source.Artifact{Ref: ref, Kind: source.KindHF, Repo: repo, QuantTag: v.Quant,
		Files: []source.ArtifactFile{{Name: "(derived, not the published file)", Size: m.Size()}}}
	return &source.Header{Artifact: a, Model: m}, "a header derived from the public config and quant recipe (its sizes are the derivation's; tokenizer and metadata text are not the file's)", nil
}
