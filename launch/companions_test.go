package launch

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/engine/enginetest"
	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/synth"
)

// A model the Hub lists with a projector beside it: the plan counts the
// projector, the pull brings it, and llama-server gets --mmproj with the
// file in the store.
func TestServeWithProjector(t *testing.T) {
	f := newFixture(t, "rtx-4090")
	tiny := synth.Vision{ImageSize: 224, PatchSize: 14, Embd: 64, FF: 128, Heads: 4, Blocks: 2, TextEmbd: 768}
	b, err := synth.Projector(tiny, gguf.TypeF16)
	if err != nil {
		t.Fatal(err)
	}
	data, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	const projName = "mmproj-Mamba2-130M-f16.gguf"
	f.hub.Add(t, smallRepo, projName, data, int64(len(data)))
	ctx := context.Background()
	m, err := f.deps.Resolve(ctx, "hf:"+smallRepo+"/"+smallFile)
	if err != nil {
		t.Fatal(err)
	}
	if m.Companions == nil || m.Companions.Projector == nil || m.Companions.ProjectorName != projName {
		t.Fatalf("companions %+v, want the projector %s", m.Companions, projName)
	}
	if !slices.ContainsFunc(m.Identity(), func(id string) bool { return strings.HasPrefix(id, "mmproj ") }) {
		t.Errorf("identity %v does not name the projector", m.Identity())
	}
	o := plan.DefaultSearch()
	o.Parallel, o.Fixed.Ctx = 1, 4096
	o.Base.Batch, o.Base.FlashAttn = 512, plan.FlashOff
	a, err := f.deps.Assess(ctx, m, o)
	if err != nil {
		t.Fatal(err)
	}
	counted := false
	for _, b := range a.Result.Buffers {
		counted = counted || b.Model == plan.ModelProjector && b.Kind == "model" && b.Device == "CUDA0"
	}
	if !counted {
		t.Errorf("the assessment does not put the projector's weights on the GPU: %+v", a.Result.Buffers)
	}
	p, err := f.deps.Pull(ctx, m, nil, f.store, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.deps.companionFiles(ctx, m, p.Manifest, f.store, false); err != nil {
		t.Fatal(err)
	}
	if filepath.Base(m.Companions.ProjectorName) != projName {
		t.Fatalf("projector file %q", m.Companions.ProjectorName)
	}
	if got, err := os.ReadFile(m.Companions.ProjectorName); err != nil || len(got) != len(data) {
		t.Fatalf("the projector in the store: %d bytes, %v", len(got), err)
	}

	bin := enginetest.BuildFake(t)
	argv := filepath.Join(t.TempDir(), "argv.json")
	run, err := f.deps.Load(ctx, a, p.Path, LoadOptions{Bin: bin, Ledger: &admission.Ledger{}, ReadyTimeout: 20 * time.Second,
		Env: []string{"FAKE_LLAMA_MODE=good", "FAKE_LLAMA_ARGV=" + argv, "FAKE_LLAMA_LOG=" + goldenLog(t, "mamba2-130m.Q8_0.cpu.c4096x1.nofa.b512")}})
	if err != nil {
		t.Fatalf("load: %v\nsaid:\n%s", err, f.said)
	}
	defer run.Stop(ctx)
	var args []string
	raw, _ := os.ReadFile(argv)
	if err := json.Unmarshal(raw, &args); err != nil {
		t.Fatal(err)
	}
	i := slices.Index(args, "--mmproj")
	if i < 0 || args[i+1] != m.Companions.ProjectorName {
		t.Errorf("llama-server got %q, want --mmproj %s", args, m.Companions.ProjectorName)
	}
}

// A projector that cannot be read is left out, and said: it is neither
// counted nor loaded.
func TestUnreadableProjectorIsLeftOut(t *testing.T) {
	f := newFixture(t, "rtx-4090")
	f.hub.Add(t, smallRepo, "mmproj-broken.gguf", []byte("not a gguf"), 10)
	m, err := f.deps.Resolve(context.Background(), "hf:"+smallRepo+"/"+smallFile)
	if err != nil {
		t.Fatal(err)
	}
	if m.Companions != nil {
		t.Errorf("companions %+v from a broken projector", m.Companions)
	}
	if !strings.Contains(f.said.String(), "mmproj-broken.gguf is left out") {
		t.Errorf("nothing said about the broken projector:\n%s", f.said)
	}
}
