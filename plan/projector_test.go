package plan

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan/graph"
	"github.com/headroom-llm/headroom/synth"
)

// projectorGolden is testdata/projector.json: llama-server loads with a
// multimodal projector and what clip logged for it.
type projectorGolden struct {
	Loads []struct {
		Name, Command string
		Vision        synth.Vision
		Type          string
		FlashAttn     FlashAttn `json:"flash_attn"`
		Logged        struct {
			Flash      string
			ComputeMiB string `json:"compute_mib"`
			Nodes      int
			ModelMiB   string `json:"model_mib"`
		}
	}
}

// loggedMiB is a byte count as llama.cpp logs it (%.2f MiB).
func loggedMiB(n int64) string { return fmt.Sprintf("%.2f", float64(n)/1024/1024) }

// TestProjectorReplayGolden holds the replay of clip's encoder graph to
// the compute buffers llama-server logged for Gemma 3's and Qwen2.5-VL's
// projectors (and smaller ones of their types, and Qwen2-VL's) on the
// CPU: the buffer to the 0.01 MiB the log prints, and the graph to its
// node count.
func TestProjectorReplayGolden(t *testing.T) {
	raw, err := os.ReadFile("testdata/projector.json")
	if err != nil {
		t.Fatal(err)
	}
	var gold projectorGolden
	if err := json.Unmarshal(raw, &gold); err != nil {
		t.Fatal(err)
	}
	if len(gold.Loads) == 0 {
		t.Fatal("no loads in testdata/projector.json")
	}
	types := map[string]gguf.GGMLType{"F16": gguf.TypeF16, "BF16": gguf.TypeBF16, "F32": gguf.TypeF32}
	cpu := Device{Name: "CPU", Backend: "CPU"}
	for _, l := range gold.Loads {
		t.Run(l.Name, func(t *testing.T) {
			typ, ok := types[l.Type]
			if !ok {
				t.Fatalf("type %q", l.Type)
			}
			proj, err := synth.ProjectorModel(l.Vision, typ)
			if err != nil {
				t.Fatal(err)
			}
			var weights int64
			for _, tn := range proj.Tensors {
				weights += int64(tn.Size)
			}
			if got := loggedMiB(weights); got != l.Logged.ModelMiB {
				t.Errorf("weights %s MiB, llama-server logged %s (%s)", got, l.Logged.ModelMiB, l.Command)
			}
			flash := l.Logged.Flash == "enabled"
			g, ok := graph.ProjectorGraph(proj, flash)
			if !ok {
				t.Fatalf("no replay for a %s projector", proj.Type)
			}
			if n := len(g.Nodes()); n != l.Logged.Nodes {
				t.Errorf("%d nodes, llama-server logged %d", n, l.Logged.Nodes)
			}
			comp := &Companions{Projector: proj, ProjectorName: "mmproj.gguf"}
			// The text context's own flash setting must not matter: clip
			// resolves -fa by itself.
			bufs := comp.projectorBuffers(graph.Context{Flash: !flash}, l.FlashAttn, cpu, nil)
			var compute []Buffer
			for _, b := range bufs {
				if b.Kind == KindCompute {
					compute = append(compute, b)
				}
			}
			if len(compute) != 1 {
				t.Fatalf("compute buffers %+v, want one on the CPU", compute)
			}
			if got := loggedMiB(compute[0].Bytes); got != l.Logged.ComputeMiB {
				t.Errorf("compute %s MiB (%d bytes), llama-server logged %s (%s)", got, compute[0].Bytes, l.Logged.ComputeMiB, l.Command)
			}
			if !strings.HasPrefix(compute[0].Note, "replay") {
				t.Errorf("note %q does not say it is a replay", compute[0].Note)
			}
		})
	}
}

// TestProjectorOtherTypesEstimated checks that a projector type headroom
// does not replay keeps the estimate and says so, on the CPU as well.
func TestProjectorOtherTypesEstimated(t *testing.T) {
	proj, err := synth.ProjectorModel(synth.SigLIP896, gguf.TypeF16)
	if err != nil {
		t.Fatal(err)
	}
	other := *proj
	other.Type = "mlp"
	broken := *proj
	broken.Tensors = nil // a gemma3 header without its tensors
	qwen, err := synth.ProjectorModel(synth.Qwen25VL7B, gguf.TypeF16)
	if err != nil {
		t.Fatal(err)
	}
	qwenBroken := *qwen
	qwenBroken.Tensors = qwen.Tensors[:len(qwen.Tensors)/2]
	for _, p := range []*arch.Projector{&other, &broken, &qwenBroken} {
		comp := &Companions{Projector: p, ProjectorName: "mmproj.gguf"}
		bufs := comp.projectorBuffers(graph.Context{Flash: true}, FlashAuto, Device{Name: "CPU", Backend: "CPU"}, nil)
		if len(bufs) != 2 || bufs[1].Kind != KindCompute || bufs[1].Note != projectorNote {
			t.Errorf("%s projector: %+v, want the estimate with its note", p.Type, bufs)
		}
	}
}
