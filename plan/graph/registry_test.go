package graph_test

import (
	"slices"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/plan/graph"
	"github.com/headroom-llm/headroom/synth"
)

// TestRegistriesAgree holds three tables keyed by architecture name to
// one another: the architectures arch models (its families), those whose
// graphs this package replays, and those synth's built-in shapes are
// written as. An architecture arch models has a graph and a shape the
// graph describes, or says here why not; every graph is of an
// architecture arch models; every shape is of one, or says here why it is
// written as another.
func TestRegistriesAgree(t *testing.T) {
	// Architectures arch models without a graph: their compute buffers
	// are the rough estimate, which says so.
	noGraph := map[string]string{
		"mamba": "Mamba-1: arch sizes its state, but the replay has only Mamba-2's mixer (build_mamba2_layer), not build_mamba_layer, and no measured load to hold one to",
	}
	// Architectures arch models that no built-in shape is written as.
	noShape := map[string]string{
		"mamba": "no Mamba-1 shape: the replay has no graph to test on one, and the catalog has no Mamba-1 model",
	}
	// Shapes written as an architecture arch does not model, on purpose
	// (what synth's --as does to any shape when it writes the file).
	otherArch := map[string]string{
		"deepseek-v3.2": "deepseek32: arch reads its indexer and caches (arch/dsa.go), but the lightning indexer's graph is not replayed yet, and a rough compute figure came 26-37% under llama-server's, so the architecture stays with llama.cpp's projection",
	}

	graphs := graph.Architectures()
	modeled := arch.Known()
	shapes := map[string][]string{} // architecture: shape names
	for _, name := range synth.Names() {
		s, _ := synth.Lookup(name)
		shapes[s.Arch] = append(shapes[s.Arch], name)
		if why, ok := otherArch[name]; ok {
			if arch.Modeled(s.Arch) {
				t.Errorf("shape %s is listed as written as an architecture arch does not model (%s), but arch models %s", name, why, s.Arch)
			}
			continue
		}
		if !arch.Modeled(s.Arch) {
			t.Errorf("shape %s is written as %s, which arch does not model (a reason in otherArch if on purpose)", name, s.Arch)
		}
	}
	for _, a := range modeled {
		if why := arch.RefusedReason(a); why != "" {
			t.Errorf("%s is modeled and refused (%s)", a, why)
		}
		_, excused := noGraph[a]
		if has := slices.Contains(graphs, a); has == excused {
			if has {
				t.Errorf("%s has a graph but is listed without one: drop it from noGraph", a)
			} else {
				t.Errorf("arch models %s, which has no graph builder (add one, or a reason to noGraph)", a)
			}
		}
		_, excused = noShape[a]
		if has := len(shapes[a]) > 0; has == excused {
			if has {
				t.Errorf("%s has shapes %v but is listed without one: drop it from noShape", a, shapes[a])
			} else {
				t.Errorf("arch models %s, which no synth shape is written as (add one, or a reason to noShape)", a)
			}
		}
	}
	for _, a := range graphs {
		if !arch.Modeled(a) {
			t.Errorf("the graph registry has %s, which arch does not model", a)
		}
	}
	for _, table := range []map[string]string{noGraph, noShape} {
		for a, why := range table {
			if !arch.Modeled(a) || why == "" {
				t.Errorf("%s is excused (%q) but arch does not model it, or no reason is given", a, why)
			}
		}
	}
}

// Every built-in shape of an architecture with a graph is a model its
// family describes: a shape the replay declined would be planned on the
// rough estimate without a test noticing.
func TestShapesHaveGraphs(t *testing.T) {
	for _, name := range synth.Names() {
		s, _ := synth.Lookup(name)
		if !slices.Contains(graph.Architectures(), s.Arch) {
			continue
		}
		m, err := synth.Model(s, synth.Q8_0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if graph.For(m) == nil {
			t.Errorf("shape %s (%s): its family does not describe it", name, s.Arch)
		}
	}
}
