package cli

import (
	"context"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/source"
)

// modelInputs is what plan and fit need of a model: a name, the planner's
// model (or why there is none) and, for a file or Hub reference, its
// header.
type modelInputs struct {
	Ref          string
	Architecture string
	Size         int64
	Arch         *arch.Model
	ArchErr      error
	// Header is nil for a catalog variant, which is planned from the
	// inputs recommend plans it from.
	Header *source.Header
	// Provenance says where a catalog variant's inputs come from.
	Provenance string
	// Shape and Quant are a catalog variant's, from which synth writes
	// the sparse twin --bench measures.
	Shape *catalog.ShapeSpec
	Quant string
}

// catalogVariant recognizes ENTRY/QUANT (catalog.FindRef: a path on disk
// is a path).
func catalogVariant(ref string) (*catalog.Catalog, *catalog.LockFile, *catalog.Entry, *catalog.Variant, error) {
	cat, err := catalog.Load()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	e, v, err := cat.FindRef(ref)
	if e == nil || err != nil {
		return nil, nil, nil, nil, err
	}
	lock, err := catalog.LoadLock()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return cat, lock, e, v, nil
}

// openInputs resolves MODEL for plan and fit. A catalog variant is
// planned from the same inputs as recommend (derived from its public
// configuration, or read from the lock), with no network, so that its
// plan is recommend's row; anything else is opened as a GGUF header.
func openInputs(ctx context.Context, env Env, ref string, quiet bool) (*modelInputs, error) {
	cat, lock, e, v, err := catalogVariant(ref)
	if err != nil {
		return nil, err
	}
	if e != nil {
		m, prov, size, err := cat.Model(e, *v, lock)
		in := &modelInputs{Ref: ref, Size: size, Arch: m, Provenance: prov, Architecture: e.Shape.Base, Shape: &e.Shape, Quant: v.Quant}
		if m != nil {
			in.Architecture = m.Arch
		}
		switch {
		case err != nil && arch.IsIncompatible(err):
			in.ArchErr = err
		case err != nil:
			return nil, err
		}
		return in, nil
	}
	h, err := openModel(ctx, env, ref, quiet)
	if err != nil {
		return nil, err
	}
	m, archErr := arch.FromGGUF(h.Model)
	return &modelInputs{Ref: h.Artifact.Ref, Architecture: h.Model.Architecture(), Size: h.Model.Size(), Arch: m, ArchErr: archErr, Header: h}, nil
}

// inputsNote says where a catalog variant's planner inputs come from.
func (in *modelInputs) inputsNote() string {
	switch in.Provenance {
	case catalog.ProvenanceDerived:
		return "planned from inputs derived from the public config and quant recipe, as recommend plans it"
	case catalog.ProvenanceInspected:
		return "planned from the locked GGUF header's inputs, as recommend plans it"
	}
	return ""
}

// header is the model's parsed GGUF header, nil for a catalog variant
// (whose derived inputs have no tokenizer text to compare a draft with).
func (in *modelInputs) header() *gguf.Model {
	if in.Header == nil {
		return nil
	}
	return in.Header.Model
}
