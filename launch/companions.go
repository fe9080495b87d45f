package launch

import (
	"context"
	"fmt"
	"slices"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/store"
)

// companions resolves what llama-server will load beside m: the projector
// the Hub lists beside it, and the draft the catalog reviewed for its
// variant. Only their headers are read; they are pulled with the model.
// One that cannot be read or modelled is said and left out, so that serve
// neither counts nor loads it.
func (d *Deps) companions(ctx context.Context, m *Model) error {
	c := &plan.Companions{DraftGPULayers: plan.GPULayersAuto}
	if f := m.Header.Artifact.MMProj; f != nil && f.URL != "" {
		h, err := d.Client.Open(ctx, f.URL)
		var proj *arch.Projector
		if err == nil {
			proj, err = arch.ProjectorFromGGUF(h.Model)
		}
		if err != nil {
			d.say("resolving", "the projector %s is left out (neither counted nor loaded): %v", f.Name, err)
		} else {
			c.Projector, c.ProjectorName = proj, f.Name
			m.ProjectorSHA256 = f.SHA256
		}
	}
	if ref, ok := d.Draft(m); ok {
		dm, err := d.resolve(ctx, ref, false)
		if err != nil {
			return fmt.Errorf("the draft %s the catalog reviewed for %s: %w", ref, m.Ref, err)
		}
		if dm.ArchErr != nil {
			d.say("resolving", "the draft %s is left out (neither counted nor loaded): %v", ref, dm.ArchErr)
		} else {
			c.Draft, c.DraftName, m.Draft = dm.Arch, ref, dm
		}
	}
	if c.Projector != nil || c.Draft != nil {
		m.Companions = c
	}
	return nil
}

// companionFiles pulls the draft (the projector came with the model's
// pull, in its manifest's extra files) and points the companions at the
// files llama-server will load. With noPull, both must be in the store
// already.
func (d *Deps) companionFiles(ctx context.Context, m *Model, man *store.Manifest, st *store.Store, noPull bool) error {
	c := m.Companions
	if c == nil {
		return nil
	}
	if c.Projector != nil && man != nil {
		i := slices.IndexFunc(man.Extra, func(f store.Installed) bool { return f.Name == c.ProjectorName })
		if i < 0 {
			return fmt.Errorf("the projector %s is not in the store beside %s", c.ProjectorName, m.Ref)
		}
		c.ProjectorName = man.Extra[i].Path
	}
	if c.Draft != nil && m.Draft != nil {
		path, _, err := d.files(ctx, m.Draft, st, noPull)
		if err != nil {
			return fmt.Errorf("the draft %s: %w", m.Draft.Ref, err)
		}
		c.DraftName = path
	}
	return nil
}

// companionFlags rewrites the plan's --mmproj and -md values to the files
// companionFiles found: the plan was made before they were pulled.
func companionFlags(flags []string, c *plan.Companions) []string {
	if c == nil {
		return flags
	}
	out := slices.Clone(flags)
	for i := 0; i+1 < len(out); i++ {
		switch out[i] {
		case "--mmproj":
			out[i+1] = c.ProjectorName
		case "-md":
			out[i+1] = c.DraftName
		}
	}
	return out
}
