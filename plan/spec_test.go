package plan

import (
	"slices"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/synth"
)

// TestSpeculativeProfile holds the rules of speculative decoding that
// the goldens measure only in part: which models can draft with an MTP
// head, the flags a profile writes, the target's output rows and
// recurrent snapshots, and the draft's state in what llama-server keeps
// while it serves.
func TestSpeculativeProfile(t *testing.T) {
	cpu := Device{Name: "CPU", Backend: "CPU"}
	headed := model(t, "qwen3.5-0.8b-mtp", synth.Q8_0)
	plain := model(t, "qwen3.5-0.8b", synth.Q8_0)
	dense := model(t, "qwen3-0.6b", synth.Q8_0)

	p := Defaults()
	p.Ctx, p.Parallel = 8192, 2
	p.Spec = &Speculative{Types: []string{SpecMTP}}
	if _, err := Account(dense, p, cpu, nil); err == nil || !strings.Contains(err.Error(), "no MTP head") {
		t.Errorf("draft-mtp on a model without NextN blocks: %v, want the head missing", err)
	}
	if _, err := Account(plain, p, cpu, nil); err == nil || !strings.Contains(err.Error(), "no MTP head") {
		t.Errorf("draft-mtp on a file without its MTP block: %v, want the head missing", err)
	}
	simple := p
	simple.Spec = &Speculative{Types: []string{SpecDraft}}
	if _, err := Account(headed, simple, cpu, nil); err == nil || !strings.Contains(err.Error(), "-md") {
		t.Errorf("draft-simple without a -md model: %v, want it refused", err)
	}
	withMD := p
	withMD.Companions = &Companions{Draft: dense, DraftName: "d.gguf", DraftGPULayers: GPULayersAuto}
	if _, err := Account(headed, withMD, cpu, nil); err == nil || !strings.Contains(err.Error(), "-md") {
		t.Errorf("draft-mtp with a -md model: %v, want it refused", err)
	}

	alone := p
	alone.Spec = nil
	r0, err := Account(headed, alone, cpu, nil)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := Account(headed, p, cpu, nil)
	if err != nil {
		t.Fatal(err)
	}
	// n_rs_seq = 3: four rows of recurrent state per sequence.
	if rs0, rs1 := sumKind(r0.Buffers, KindRS, ""), sumKind(r1.Buffers, KindRS, ""); rs1 != 4*rs0 {
		t.Errorf("recurrent state %d with draft-mtp, want 4 x %d", rs1, rs0)
	}
	if r1.Context.NOutputsMax != 8 || r0.Context.NOutputsMax != 2 {
		t.Errorf("n_outputs_max %d and %d, want 8 (2 slots x (1 + 3 drafted)) and 2", r1.Context.NOutputsMax, r0.Context.NOutputsMax)
	}
	for _, k := range []BufferKind{KindKV, KindOutput, KindCompute} {
		if sumKind(r1.Buffers, k, ModelDraft) == 0 || sumKind(r0.Buffers, k, ModelDraft) != 0 {
			t.Errorf("draft %s buffer: %d with draft-mtp, %d without", k, sumKind(r1.Buffers, k, ModelDraft), sumKind(r0.Buffers, k, ModelDraft))
		}
	}
	// The draft's KV of the MTP layer is in every prompt cache entry and
	// checkpoint.
	if c0, c1 := sumKind(r0.Serving, KindCheckpoints, ""), sumKind(r1.Serving, KindCheckpoints, ""); c1 <= c0 {
		t.Errorf("checkpoints %d with draft-mtp, %d without: the draft's cache is in each", c1, c0)
	}
	if g := sumKind(r1.Serving, KindOutputGrowth, ""); g <= 0 {
		t.Errorf("no output growth for the drafted rows and hidden states: %d", g)
	}

	q := p
	q.Spec = &Speculative{Types: []string{SpecNone, SpecMTP}, DraftMax: 5, CacheK: "q8_0", CacheV: "q8_0"}
	args := strings.Join(q.Args(), " ")
	if !strings.Contains(args, "--spec-type draft-mtp --spec-draft-n-max 5 -ctkd q8_0 -ctvd q8_0") {
		t.Errorf("args %q lack the speculative flags", args)
	}
	if q.ServerOutputsMax(2048) != 12 {
		t.Errorf("n_outputs_max %d with 5 drafted tokens and 2 slots, want 12", q.ServerOutputsMax(2048))
	}
	// A -md model without --spec-type drafts nothing: one row a slot.
	if withMD.Spec = nil; withMD.ServerOutputsMax(2048) != 2 {
		t.Errorf("n_outputs_max %d for -md without a type, want 2", withMD.ServerOutputsMax(2048))
	}
	if got := (&Speculative{Types: []string{SpecDraft}}).flags(); !slices.Equal(got, []string{"--spec-type", "draft-simple"}) {
		t.Errorf("draft-simple flags %q", got)
	}
}

// sumKind totals the buffers of one kind and companion.
func sumKind(bs []Buffer, k BufferKind, model string) int64 {
	var n int64
	for _, b := range bs {
		if b.Kind == k && b.Model == model {
			n += b.Bytes
		}
	}
	return n
}
