package plan

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/builds"
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
		// Backend is "Vulkan" for a load on llvmpipe (the machine of
		// conformance/testdata/llvmpipe-machine.json), "" for the CPU.
		Backend string
		Logged  struct {
			Flash      string
			ComputeMiB string `json:"compute_mib"`
			// HostMiB is the CPU compute buffer beside a GPU's.
			HostMiB  string `json:"host_mib"`
			Nodes    int
			ModelMiB string `json:"model_mib"`
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
			var gpus []Device
			if l.Backend == "Vulkan" {
				gpus = []Device{llvmpipe}
			}
			// The text context's own flash setting must not matter: clip
			// resolves -fa by itself.
			bufs := comp.projectorBuffers(graph.Context{Flash: !flash}, l.FlashAttn, builds.Default(), cpu, gpus)
			compute := map[string]Buffer{}
			for _, b := range bufs {
				if b.Kind == KindCompute {
					compute[b.Device] = b
				}
			}
			want := map[string]string{"CPU": l.Logged.ComputeMiB}
			if l.Backend == "Vulkan" {
				want = map[string]string{"Vulkan0": l.Logged.ComputeMiB, "CPU": l.Logged.HostMiB}
			}
			if len(compute) != len(want) {
				t.Fatalf("compute buffers %+v, want %v", compute, want)
			}
			for dev, mib := range want {
				b := compute[dev]
				if got := loggedMiB(b.Bytes); got != mib {
					t.Errorf("%s compute %s MiB (%d bytes), llama-server logged %s (%s)", dev, got, b.Bytes, mib, l.Command)
				}
				if !strings.HasPrefix(b.Note, "replay") {
					t.Errorf("note %q does not say it is a replay", b.Note)
				}
			}
		})
	}
}

// llvmpipe is the Vulkan device of the projector's Vulkan goldens, as
// conformance/testdata/llvmpipe-machine.json describes it.
var llvmpipe = Device{Name: "Vulkan0", Backend: "Vulkan", Free: 2 << 30, MaxAlloc: 128 << 20, Align: 16, HostAlign: 64}

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
		bufs := comp.projectorBuffers(graph.Context{Flash: true}, FlashAuto, builds.Default(), Device{Name: "CPU", Backend: "CPU"}, nil)
		if len(bufs) != 2 || bufs[1].Kind != KindCompute || bufs[1].Note != projectorNote {
			t.Errorf("%s projector: %+v, want the estimate with its note", p.Type, bufs)
		}
	}
}

// TestProjectorGPUEstimated: on a GPU only Gemma 3's encoder on Vulkan is
// replayed; Pixtral's and Qwen's on Vulkan, and every type on CUDA, keep
// the estimate (its compute buffer on the GPU, the pixels on the host).
func TestProjectorGPUEstimated(t *testing.T) {
	cuda := Device{Name: "CUDA0", Backend: "CUDA", Free: 24 << 30}
	cases := []struct {
		v      synth.Vision
		gpu    Device
		replay bool
	}{
		{synth.Vision{ImageSize: 448, PatchSize: 14, Embd: 768, FF: 3072, Heads: 12, Blocks: 4, TextEmbd: 1152}, llvmpipe, true},
		{synth.SigLIP896, cuda, false},
		{synth.MistralVision, llvmpipe, false},
		{synth.Qwen25VL7B, llvmpipe, false},
	}
	for _, c := range cases {
		proj, err := synth.ProjectorModel(c.v, gguf.TypeF16)
		if err != nil {
			t.Fatal(err)
		}
		comp := &Companions{Projector: proj, ProjectorName: "mmproj.gguf"}
		bufs := comp.projectorBuffers(graph.Context{Flash: true}, FlashAuto, builds.Default(), Device{Name: "CPU", Backend: "CPU"}, []Device{c.gpu})
		var notes []string
		for _, b := range bufs {
			if b.Kind == KindCompute {
				notes = append(notes, b.Device+": "+b.Note)
			}
		}
		want := projectorNote
		if c.replay {
			want = projectorVulkanNote
		}
		if len(notes) != 2 || !strings.HasSuffix(notes[0], want) || !strings.HasSuffix(notes[1], want) || !strings.HasPrefix(notes[0], c.gpu.Name) {
			t.Errorf("%s on %s: compute %q, want the GPU's and the host's with %q", proj.Type, c.gpu.Name, notes, want)
		}
	}
}
