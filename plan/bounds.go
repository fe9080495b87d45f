package plan

import (
	"fmt"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan/ggml"
	"github.com/headroom-llm/headroom/plan/graph"
)

// boundsMemo spares a search most compute-buffer replays. For one
// placement (everything in the profile but the context), compute buffers
// grow with the context: every tensor of the graph is as large or larger
// with more cache cells. So the replays already made at other contexts
// bound the one asked about: if the profile fits with the compute buffers
// of a larger context, it fits; if it is short with those of a smaller
// one, it is short. Only when the bounds disagree is the graph replayed,
// and that replay becomes a bound for the next question. The growth is not
// strict (ggml's allocator can pack a larger graph a little tighter), so
// the search checks what it chose with an exact accounting.
type boundsMemo struct {
	m       *arch.Model
	s       *hw.Snapshot
	cpu     Device
	gpus    []Device
	target  int64
	anchors map[string][]anchor
	build   graph.Builder
	// placed holds each placement's model buffers: a search asks about
	// many contexts for one placement, and the weights do not change.
	placed map[string]modelPlacement
	// mem is the arena every replay of this memo builds its graphs in.
	mem *ggml.Arena
}

type anchor struct {
	ctx     int
	compute []Buffer
}

func newBoundsMemo(m *arch.Model, s *hw.Snapshot, cpu Device, gpus []Device, target int64) *boundsMemo {
	return newBoundsMemoWith(m, s, cpu, gpus, target, graph.For(m))
}

// newBoundsMemoWith is newBoundsMemo with the model's graph builder
// already chosen.
func newBoundsMemoWith(m *arch.Model, s *hw.Snapshot, cpu Device, gpus []Device, target int64, build graph.Builder) *boundsMemo {
	return &boundsMemo{m: m, s: s, cpu: cpu, gpus: gpus, target: target, anchors: map[string][]anchor{}, build: build,
		placed: map[string]modelPlacement{}, mem: &ggml.Arena{}}
}

// placementKey is the profile without its context.
func placementKey(p Profile) string {
	p.Ctx = 0
	return fmt.Sprintf("%+v", p)
}

// keeps reports whether p leaves the target free in domain only, or in
// every domain when only is "", with an assessment: exact when a replay
// was needed, else one whose compute buffers are the bound that decided
// (callers that show a result assess it again with assessOnce).
func (b *boundsMemo) keeps(p Profile, only string) (*Assessment, bool, error) {
	key := placementKey(p)
	r, err := b.place(p, key)
	if err != nil {
		return nil, false, err
	}
	judge := func(compute []Buffer) (*Assessment, bool, error) {
		q := *r
		q.Buffers = append(append([]Buffer(nil), r.Buffers...), compute...)
		a, err := q.Against(b.s)
		if err != nil {
			return nil, false, err
		}
		if only != "" {
			return a, marginIn(a, only) >= b.target, nil
		}
		return a, a.Verdict == Fits && a.LeastMargin() >= b.target, nil
	}
	if a, ok, err := judge(nil); err != nil || !ok {
		return a, false, err
	}
	var below, above *anchor
	for i := range b.anchors[key] {
		an := &b.anchors[key][i]
		if an.ctx <= p.Ctx && (below == nil || an.ctx > below.ctx) {
			below = an
		}
		if an.ctx >= p.Ctx && (above == nil || an.ctx < above.ctx) {
			above = an
		}
	}
	if above != nil {
		if a, ok, err := judge(above.compute); err != nil || ok || above.ctx == p.Ctx {
			return a, ok, err
		}
	}
	if below != nil {
		if a, ok, err := judge(below.compute); err != nil || !ok {
			return a, false, err
		}
	}
	compute := computeBuffersWith(b.build, b.m, r.Context, p, b.cpu, b.gpus, r.LayerDevice, b.homes(p, key, r.LayerDevice), b.mem)
	b.anchors[key] = append(b.anchors[key], anchor{ctx: p.Ctx, compute: compute})
	return judge(compute)
}

// place is Place for p, whose placement key is key, with the model
// buffers of an earlier call for the same placement.
func (b *boundsMemo) place(p Profile, key string) (*Result, error) {
	mp, ok := b.placed[key]
	if !ok {
		var err error
		if mp, err = placeModel(b.m, p, b.cpu, b.gpus); err != nil {
			return nil, err
		}
		b.placed[key] = mp
	}
	return placeWith(b.m, p, b.cpu, b.gpus, mp)
}

// homes are the weights' homes of p's placement, whose key is key.
func (b *boundsMemo) homes(p Profile, key string, layerDev []string) map[string]graph.Home {
	mp := b.placed[key]
	if mp.homes == nil {
		mp.homes = weightHomes(b.m, p, b.cpu, b.gpus, layerDev)
		b.placed[key] = mp
	}
	return mp.homes
}

// mayKeep is an optimistic answer without a replay: false only when p
// cannot leave the target free whatever its compute buffers and however
// its layers are split over the GPUs. It bounds layer searches from above.
func (b *boundsMemo) mayKeep(p Profile) bool {
	r, err := b.place(p, placementKey(p))
	if err != nil {
		return false
	}
	a, err := r.Against(b.s)
	if err != nil {
		return false
	}
	if a.Verdict == Fits && a.LeastMargin() >= b.target {
		return true
	}
	if len(b.gpus) < 2 || len(a.Breaches) > 0 {
		return false
	}
	gpu := map[string]bool{}
	for _, g := range b.gpus {
		if d, err := b.s.DomainOf(g.Name); err == nil {
			gpu[d.ID] = true
		}
	}
	var need, room int64
	for _, d := range a.Domains {
		switch {
		case gpu[d.ID]:
			need += d.Required
			room += d.Available - b.target
		case d.Required > 0 && d.Margin < b.target:
			return false
		}
	}
	return need <= room
}

// exact is the exact assessment of p, from a replay already made at its
// context when there is one.
func (b *boundsMemo) exact(p Profile) (*Assessment, error) {
	key := placementKey(p)
	r, err := b.place(p, key)
	if err != nil {
		return nil, err
	}
	for _, an := range b.anchors[key] {
		if an.ctx == p.Ctx {
			r.Buffers = append(r.Buffers, an.compute...)
			return r.Against(b.s)
		}
	}
	r.Buffers = append(r.Buffers, computeBuffersWith(b.build, b.m, r.Context, p, b.cpu, b.gpus, r.LayerDevice, b.homes(p, key, r.LayerDevice), b.mem)...)
	return r.Against(b.s)
}
