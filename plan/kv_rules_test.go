package plan

import (
	"github.com/headroom-llm/headroom/builds"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/synth"
)

// From de3ff81 the NextN block has no KV cache: GLM-4.5-Air's 47 blocks
// keep 47 layers of cache under 80fb11a's rules and 46 under de3ff81's,
// 752 and 736 MiB at 4096 cells (llama-fit-params of each build).
func TestNextNWithoutKV(t *testing.T) {
	m := model(t, "glm-4.5-air", synth.Q4_K_M)
	if m.NextN != 1 {
		t.Fatalf("NextN %d, want 1", m.NextN)
	}
	cpu := Device{Name: "CPU", Backend: "CPU"}
	for _, tt := range []struct {
		rules builds.Rules
		mib   int64
	}{{measuredRules(t, "80fb11a"), 752}, {measuredRules(t, "80fb11a", func(r *builds.Rules) { r.NextNWithoutKV = true }), 736}} {
		p := Defaults()
		p.Ctx, p.Parallel, p.GPULayers, p.FlashAttn, p.Rules = 4096, 1, 0, FlashOn, &tt.rules
		r, err := Place(m, p, cpu, nil)
		if err != nil {
			t.Fatal(err)
		}
		var kv int64
		for _, b := range r.Buffers {
			if b.Kind == KindKV {
				kv += b.Bytes
			}
		}
		if kv != tt.mib<<20 {
			t.Errorf("%+v: KV %d bytes, want %d MiB", tt.rules, kv, tt.mib)
		}
	}
}

// de3ff81's llama-server refuses --no-mmap; for it headroom writes
// --load-mode none, which 80fb11a takes too.
func TestLoadModeFlag(t *testing.T) {
	p := Defaults()
	p.Mmap = false
	old, de := measuredRules(t, "80fb11a"), measuredRules(t, "de3ff81")
	p.Rules = &old
	if a := argsString(p.Args()); !strings.Contains(a, "--no-mmap") || strings.Contains(a, "--load-mode") {
		t.Errorf("80fb11a: %s", a)
	}
	p.Rules = &de
	if a := argsString(p.Args()); strings.Contains(a, "--no-mmap") || !strings.Contains(a, "--load-mode none") {
		t.Errorf("de3ff81: %s", a)
	}
}
