package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/launch"
	"github.com/headroom-llm/headroom/server"
)

// launchLoader starts the provider's models through the same chain as
// /api/load (launch.Deps.Launch), asking the pool for room when the
// ledger refuses.
type launchLoader struct{ rt *apiRuntime }

func (l launchLoader) Load(ctx context.Context, m server.ServedModel, room server.Room) (server.Child, error) {
	rt := l.rt
	if rt.bin == "" {
		return nil, errors.New("llama-server was not found when the API started; restart it with --llama-server")
	}
	// The alias makes llama-server answer with the name the client used.
	// The plan counts what the pool would stop as free, so a model that
	// fits once an idle one is stopped gets its whole plan.
	opts := rt.opts
	if m.Search != nil {
		opts = *m.Search // its own settings (--models-preset)
	}
	var progress func(launch.Progress)
	if room.Progress != nil {
		progress = func(p launch.Progress) {
			pct := -1.0
			if p.Fraction >= 0 {
				pct = 100 * p.Fraction
			}
			room.Progress(server.Progress{Step: p.Step, Detail: p.Detail, Percent: pct})
		}
	}
	run, err := rt.d.Launch(ctx, m.Ref, launch.Options{Search: opts, Store: rt.st, EngineCheck: true,
		Reclaim: func(b admission.Booking) bool { return room.Reclaimable(b.ID) },
		Load: launch.LoadOptions{Bin: rt.bin, Ledger: rt.ledger, Records: filepath.Join(rt.st.Root, "runs"), Observations: filepath.Join(rt.st.Root, "observed"),
			ReadyTimeout: rt.ready, Extra: []string{"--alias", m.Name}, Evict: room.Evict, Progress: progress}})
	var (
		nf      *launch.NotFit
		refusal *admission.Refusal
	)
	switch {
	case errors.As(err, &nf):
		return nil, &server.Refused{Reason: nf.Error()}
	case errors.As(err, &refusal):
		return nil, &server.Refused{Reason: refusal.Error()}
	case err != nil:
		return nil, err
	}
	return runChild{run}, nil
}

// runChild is a launched model as the pool sees it.
type runChild struct{ run *launch.Running }

func (c runChild) URL() string                    { return c.run.Server.URL() }
func (c runChild) Booking() admission.Booking     { return c.run.Ticket.Booking }
func (c runChild) Flags() []string                { return c.run.Flags }
func (c runChild) Exited() <-chan struct{}        { return c.run.Server.Exited() }
func (c runChild) Stop(ctx context.Context) error { return c.run.Stop(ctx) }

// shardRE matches a split model's shard names, as llama.cpp writes them.
var shardRE = regexp.MustCompile(`-(\d{5})-of-(\d{5})\.gguf$`)

// modelsDir lists the GGUF models in dir by the names llama-server's
// router gives them: a file's name without .gguf, and a split model's
// first shard's. Projectors (mmproj*) are companions, not models.
func modelsDir(dir string) (map[string]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--models-dir: %w", err)
	}
	out := map[string]string{}
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(strings.ToLower(name), ".gguf") || strings.HasPrefix(strings.ToLower(name), "mmproj") {
			continue
		}
		if m := shardRE.FindStringSubmatch(name); m != nil && m[1] != "00001" {
			continue
		}
		abs, err := filepath.Abs(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		out[name[:len(name)-len(".gguf")]] = abs
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--models-dir %s holds no .gguf file", dir)
	}
	return out, nil
}

// servedModels are the models the provider knows before any request:
// a directory's files, and the pinned ones.
func servedModels(dir map[string]string, pins []string, idle time.Duration, accept func(string) error) ([]server.ServedModel, error) {
	var out []server.ServedModel
	for name, path := range dir {
		out = append(out, server.ServedModel{Name: name, Ref: path, Idle: idle, Pinned: slices.Contains(pins, name)})
	}
	for _, p := range pins {
		if _, ok := dir[p]; ok {
			continue
		}
		if err := accept(p); err != nil {
			return nil, usagef("--pin %s: %v", p, err)
		}
		out = append(out, server.ServedModel{Name: p, Ref: p, Idle: idle, Pinned: true})
	}
	slices.SortFunc(out, func(a, b server.ServedModel) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
