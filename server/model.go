package server

import (
	"context"
	"errors"
	"fmt"
	"github.com/headroom-llm/headroom/report"
	"io/fs"
	"net/http"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/source"
)

// resolved is a model ready to plan. archErr is set, and m nil, when
// headroom cannot model its architecture: that is a verdict, not a failure.
type resolved struct {
	m        *arch.Model
	archErr  error
	artifact report.Artifact
	// serverArgs name the model on a llama-server command line; nil
	// where this server knows no name llama-server could load it by (a
	// model Config.Open found, named as the request named it).
	serverArgs []string
}

// model resolves a request's model: a catalog variant offline, anything
// else through Config.Open.
func (s *server) model(ctx context.Context, ref string) (*resolved, error) {
	switch e, v, err := s.cfg.Catalog.Find(ref); {
	case err != nil:
		return nil, notFound("%v", err).withCode(CodeModelNotFound)
	case e != nil:
		return s.catalogModel(e, v)
	}
	if s.cfg.Open == nil {
		return nil, notFound("model %q is not a catalog variant (ENTRY/QUANT, as /v1/models lists them), and this server opens no other models", ref).withCode(CodeModelNotFound)
	}
	m, err := s.opener.get(ctx, ref)
	switch {
	case err != nil && arch.IsIncompatible(err):
		return &resolved{archErr: err, artifact: report.Artifact{Ref: ref, Files: []source.ArtifactFile{}}}, nil
	case errors.Is(err, ErrForbidden):
		return nil, withStatus(http.StatusForbidden, err, "model %q", ref)
	case errors.Is(err, fs.ErrNotExist):
		return nil, withStatus(http.StatusNotFound, err, "model %q not found", ref).withCode(CodeModelNotFound)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, withStatus(http.StatusBadRequest, err, "cannot open model %q", ref)
	case m == nil:
		return nil, fmt.Errorf("opening model %q gave no model and no error", ref)
	}
	var size int64
	for _, t := range m.Tensors {
		size += int64(t.Size)
	}
	return &resolved{m: m, artifact: report.Artifact{Ref: ref, Architecture: m.Arch, Files: []source.ArtifactFile{}, SizeBytes: size}}, nil
}

func (s *server) catalogModel(e *catalog.Entry, v *catalog.Variant) (*resolved, error) {
	m, prov, size, err := s.cfg.Catalog.Model(e, *v, s.cfg.Lock)
	key := catalog.VariantKey(e.ID, v.Quant)
	r := &resolved{m: m, artifact: report.Artifact{Ref: v.Ref, Files: []source.ArtifactFile{}, SizeBytes: size, Variant: key, Inputs: prov},
		serverArgs: s.cfg.Lock.ServerArgs(e, *v)}
	switch {
	case err != nil && arch.IsIncompatible(err):
		r.m, r.archErr = nil, err
	case err != nil:
		return nil, fmt.Errorf("building the planner model of catalog variant %s: %w", key, err)
	default:
		r.artifact.Architecture = m.Arch
	}
	if pkg, _ := s.cfg.Lock.Lookup(e.ID, *v); pkg != nil {
		r.artifact.Commit = pkg.Commit
		for _, f := range pkg.Files {
			r.artifact.Files = append(r.artifact.Files, source.ArtifactFile{Name: f.Name, Size: f.Size, SHA256: f.SHA256})
		}
	}
	return r, nil
}

// subject is what fit and plan answer about: the machine the query names,
// the model ref names and, for an architecture headroom does not model,
// the projector that stands in for it (see projector); call done when
// finished.
func (s *server) subject(ctx context.Context, q *query, ref string) (m machine, res *resolved, pr *engine.Projector, done func(), err error) {
	done = func() {}
	if m, err = s.machine(ctx, q); err != nil {
		return m, nil, nil, done, err
	}
	if res, err = s.model(ctx, ref); err != nil {
		return m, nil, nil, done, err
	}
	pr, done, err = s.projector(ctx, ref, res)
	return m, res, pr, done, err
}

// projector is the user's llama.cpp that answers for a resolved model
// whose architecture headroom does not model (Config.Project), and what
// to call when done; nil for a modeled one, a catalog variant, or a
// server without Project. A model that cannot be projected keeps its
// incompatible verdict, with the reason that says what would fix it.
func (s *server) projector(ctx context.Context, ref string, res *resolved) (*engine.Projector, func(), error) {
	none := func() {}
	if res.archErr == nil || s.cfg.Project == nil || res.artifact.Variant != "" {
		return nil, none, nil
	}
	pr, done, err := s.cfg.Project(ctx, ref)
	switch {
	case err != nil && arch.IsIncompatible(err):
		res.archErr = err
		return nil, none, nil
	case err != nil:
		return nil, none, withStatus(http.StatusBadRequest, err, "cannot project model %q", ref)
	}
	return pr, done, nil
}
