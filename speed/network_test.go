package speed

import (
	"testing"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

func TestNetworkTraffic(t *testing.T) {
	local, err := hw.LoadMachine("rtx-4090")
	if err != nil {
		t.Fatal(err)
	}
	gpus, _ := hw.LoadMachine("2x-rtx-3090")
	cpu, _ := hw.LoadMachine("cpu-32")
	s, err := hw.Join(local, []hw.Remote{{Endpoint: "a:1", Snapshot: gpus}, {Endpoint: "b:1", Snapshot: cpu}})
	if err != nil {
		t.Fatal(err)
	}
	m := &arch.Model{NEmbd: 4096, NVocab: 128256, NLayer: 4}
	act, logits := int64(4096*4), int64(128256*4)
	for _, c := range []struct {
		name      string
		layers    []string
		gbps      float64
		want      int64
		crossings int
	}{
		{"all local", []string{"CUDA0", "CUDA0", "CUDA0", "CUDA0", "CUDA0"}, 0, -1, 0},
		{"remote then local", []string{"RPC0", "RPC1", "CUDA0", "CUDA0", "CUDA0"}, 10, 2 * act, 2},
		{"two servers", []string{"RPC0", "RPC0", "RPC2", "CUDA0", "CUDA0"}, 10, act + 2*act + act, 3},
		{"output remote", []string{"CUDA0", "CUDA0", "RPC0", "RPC0", "RPC0"}, 0, act + logits, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, err := NetworkTraffic(m, &plan.Result{LayerDevice: c.layers}, s, c.gbps)
			if err != nil {
				t.Fatal(err)
			}
			if c.want < 0 {
				if n != nil {
					t.Errorf("traffic %+v for a local plan", n)
				}
				return
			}
			if n == nil || n.BytesPerToken != c.want || len(n.Crossings) != c.crossings {
				t.Fatalf("got %+v, want %d bytes over %d crossings", n, c.want, c.crossings)
			}
			wantGbps := c.gbps
			if wantGbps == 0 {
				wantGbps = DefaultNetworkGbps
			}
			if ms := float64(c.want) * 8 / (wantGbps * 1e9) * 1e3; n.Gbps != wantGbps || n.Ms != ms {
				t.Errorf("%g Gbit/s, %g ms; want %g, %g", n.Gbps, n.Ms, wantGbps, ms)
			}
		})
	}
	if _, err := NetworkTraffic(m, &plan.Result{}, s, -1); err == nil {
		t.Error("a negative bandwidth was accepted")
	}
}
