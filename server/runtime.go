package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/headroom-llm/headroom/source"
)

// maxBody bounds a POST body; a load request is a few hundred bytes.
const maxBody = 1 << 20

// LoadRequest asks the runtime to load a model.
type LoadRequest struct {
	// Model is a catalog variant (ENTRY/QUANT) or another reference the
	// runtime accepts.
	Model string `json:"model"`
	// Ctx is the total context across slots (llama-server's -c); zero lets
	// the plan choose.
	Ctx int `json:"ctx,omitempty"`
	// Parallel is the number of slots (-np); zero lets the plan choose.
	Parallel int `json:"parallel,omitempty"`
}

// UnloadRequest asks to stop an instance: by its id (/api/instances), or
// a served model by its name.
type UnloadRequest struct {
	ID    string `json:"id,omitempty"`
	Model string `json:"model,omitempty"`
}

// Instance is a model the runtime has loaded or is loading.
type Instance struct {
	ID    string `json:"id"`
	Model string `json:"model"`
	// State is the runtime's word for where the instance is (for example
	// starting, ready, failed).
	State string `json:"state"`
	// URL is where its llama-server answers, once it does.
	URL string `json:"url,omitempty"`
	// Flags are the llama-server flags it was started with.
	Flags  []string `json:"flags,omitempty"`
	Reason string   `json:"reason,omitempty"`
	// Served says the OpenAI-compatible provider loaded it on demand; the
	// fields below are its.
	Served bool `json:"served,omitempty"`
	// Memory is its booking's bytes per memory domain.
	Memory   map[string]int64 `json:"memory,omitempty"`
	InFlight int              `json:"in_flight,omitempty"`
	Waiting  int              `json:"waiting,omitempty"`
	LastUsed *time.Time       `json:"last_used,omitempty"`
	Pinned   bool             `json:"pinned,omitempty"`
	// Progress is where its load stands, while it loads.
	Progress *Progress `json:"progress,omitempty"`
	// Aliases are other names requests may give it by.
	Aliases []string `json:"aliases,omitempty"`
	// Source says where its settings come from.
	Source string `json:"source,omitempty"`
	// Settings are the llama-server flags its settings give, before
	// the plan's.
	Settings []string `json:"settings,omitempty"`
	// Stale says its settings changed since its server started; they
	// apply from its next load.
	Stale bool `json:"stale,omitempty"`
}

// Runtime loads and unloads models through admission: a load is assessed
// against the machine as it is at that moment before anything starts.
// Besides the errors each method names, one wrapping source.ErrBadRef (a
// reference that does not parse, or of a scheme headroom does not read)
// answers 400, and one wrapping fs.ErrNotExist 404.
type Runtime interface {
	// Load admits and starts a model. A *Refused error means admission
	// said no; the API answers 409 with its reason.
	Load(ctx context.Context, req LoadRequest) (*Instance, error)
	// Unload stops an instance; ErrUnknownInstance answers 404.
	Unload(ctx context.Context, id string) error
	// Instances lists the instances, in any state.
	Instances() []Instance
}

// Refused is admission's no: the model does not fit the machine as it is
// now. Reason says which memory domain is short and by how much.
type Refused struct {
	Reason string
}

// Error says that admission refused, and why.
func (e *Refused) Error() string { return "refused by admission: " + e.Reason }

// ErrUnknownInstance is what Runtime.Unload returns for an id it does not
// know.
var ErrUnknownInstance = errors.New("no such instance")

// ErrForbidden marks a reference a request may not name (a path outside
// headroom's store, a URL); Config.Open and Runtime.Load wrap it, and the
// API answers 403.
var ErrForbidden = errors.New("not allowed")

func (s *server) runtime(r *http.Request) (Runtime, error) {
	if s.cfg.Runtime == nil {
		return nil, noRuntime(r, "load")
	}
	return s.cfg.Runtime, nil
}

func (s *server) load(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	rt, err := s.runtime(r)
	if err != nil {
		return err
	}
	var req LoadRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(req.Model) == "":
		return badRequest("model is required: a catalog variant such as qwen3-8b/Q4_K_M")
	case req.Ctx < 0 || req.Ctx > maxCtx:
		return badRequest("ctx must be from 0 (the plan chooses) to %d, not %d", maxCtx, req.Ctx)
	case req.Parallel < 0 || req.Parallel > 256:
		return badRequest("parallel must be from 0 (the plan chooses) to 256, not %d", req.Parallel)
	}
	inst, err := rt.Load(r.Context(), req)
	if err != nil {
		return runtimeError(err, "loading %s", req.Model)
	}
	if inst == nil {
		return fmt.Errorf("loading %s: the runtime gave no instance and no error", req.Model)
	}
	writeJSON(w, http.StatusOK, inst)
	return nil
}

func (s *server) unload(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	if s.cfg.Runtime == nil && s.cfg.Pool == nil {
		return noRuntime(r, "load")
	}
	var req UnloadRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	switch {
	case req.ID == "" && req.Model == "":
		return badRequest("id or model is required: an instance id or a model's name from /api/instances")
	case req.ID != "" && req.Model != "":
		return badRequest("give id or model, not both")
	case req.Model != "":
		if err := s.poolUnload(r.Context(), req.Model); err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, struct {
			Model string `json:"model"`
			State string `json:"state"`
		}{req.Model, StateUnloaded})
		return nil
	}
	err := ErrUnknownInstance
	if s.cfg.Runtime != nil {
		err = s.cfg.Runtime.Unload(r.Context(), req.ID)
	}
	if errors.Is(err, ErrUnknownInstance) && s.cfg.Pool != nil {
		// A served model's id is its booking's, as /api/instances lists it.
		if name, ok := s.cfg.Pool.byBooking(req.ID); ok {
			err = s.poolUnload(r.Context(), name)
		}
	}
	if err != nil {
		return runtimeError(err, "unloading %s", req.ID)
	}
	writeJSON(w, http.StatusOK, struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}{req.ID, "unloaded"})
	return nil
}

// runtimeError gives a runtime's failure its status.
func runtimeError(err error, format string, args ...any) error {
	var refused *Refused
	switch {
	case errors.As(err, &refused):
		return &apiError{status: http.StatusConflict, msg: refused.Reason, err: err}
	case errors.Is(err, ErrForbidden):
		return withStatus(http.StatusForbidden, err, format, args...)
	case errors.Is(err, source.ErrBadRef):
		// file://, gopher:// or a malformed hf: reference: the request
		// is wrong, not the server.
		return withStatus(http.StatusBadRequest, err, format, args...)
	case errors.Is(err, ErrUnknownInstance), errors.Is(err, fs.ErrNotExist):
		return withStatus(http.StatusNotFound, err, format, args...)
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// decodeBody reads one JSON object of at most maxBody bytes, refusing
// fields it does not know: a misspelt field silently ignored would load
// something other than what was asked for.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	// The guard has required application/json already.
	if r.ContentLength > maxBody {
		return &apiError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("body is %d bytes, larger than the %d allowed", r.ContentLength, maxBody)}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// One object and nothing after it.
		if _, err = dec.Token(); err == io.EOF {
			return nil
		} else if err == nil {
			err = errors.New("data after the JSON object")
		}
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return &apiError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("body is larger than %d bytes", tooBig.Limit)}
	case errors.Is(err, io.EOF):
		return badRequest("body is empty; want a JSON object")
	}
	return withStatus(http.StatusBadRequest, err, "body must be one JSON object with known fields")
}
