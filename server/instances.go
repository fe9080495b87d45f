package server

import (
	"context"
	"errors"
	"net/http"
)

// The served models by name: /api/pin and /api/unpin, and llama-server's
// router endpoints /models/load and /models/unload, which tools written
// for the router already call.

// modelRequest names a served model.
type modelRequest struct {
	Model string `json:"model"`
}

// servedModel reads a request naming a served model, on a server that
// has a pool.
func (s *server) servedModel(w http.ResponseWriter, r *http.Request) (string, error) {
	if _, err := parseQuery(r); err != nil {
		return "", err
	}
	if s.cfg.Pool == nil {
		return "", noRuntime(r, "serve")
	}
	var req modelRequest
	if err := decodeBody(w, r, &req); err != nil {
		return "", err
	}
	if req.Model == "" {
		return "", badRequest("model is required: a name GET /v1/models lists")
	}
	return req.Model, nil
}

// byNameError is a failure of a by-name request to the pool, with its
// status.
func byNameError(name string, err error) error {
	switch {
	case errors.Is(err, ErrUnknownModel):
		return withStatus(http.StatusNotFound, err, "model %q", name).withCode(CodeModelNotFound)
	case errors.Is(err, ErrNotLoaded):
		return withStatus(http.StatusConflict, err, "unloading %q", name).withCode("model_not_loaded")
	}
	return err
}

func (s *server) poolUnload(ctx context.Context, name string) error {
	if s.cfg.Pool == nil {
		return notFound("model %q: this server serves no models", name).withCode(CodeModelNotFound)
	}
	if err := s.cfg.Pool.Unload(ctx, name); err != nil {
		return byNameError(name, err)
	}
	return nil
}

// pin answers /api/pin (pinned true) and /api/unpin.
func (s *server) pin(pinned bool) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		name, err := s.servedModel(w, r)
		if err != nil {
			return err
		}
		if err := s.cfg.Pool.SetPinned(name, pinned); err != nil {
			return byNameError(name, err)
		}
		writeJSON(w, http.StatusOK, struct {
			Model  string `json:"model"`
			Pinned bool   `json:"pinned"`
		}{name, pinned})
		return nil
	}
}

// routerSuccess is what llama-server's router answers a load or unload.
type routerSuccess struct {
	Success bool `json:"success"`
}

// modelsLoad answers /models/load: the model loaded, as its first
// request would load it; it answers once it is loaded.
func (s *server) modelsLoad(w http.ResponseWriter, r *http.Request) error {
	name, err := s.servedModel(w, r)
	if err != nil {
		return err
	}
	if err := s.cfg.Pool.Load(r.Context(), name); err != nil {
		return poolError(w, name, err)
	}
	writeJSON(w, http.StatusOK, routerSuccess{true})
	return nil
}

// modelsUnload answers /models/unload.
func (s *server) modelsUnload(w http.ResponseWriter, r *http.Request) error {
	name, err := s.servedModel(w, r)
	if err != nil {
		return err
	}
	if err := s.poolUnload(r.Context(), name); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, routerSuccess{true})
	return nil
}
