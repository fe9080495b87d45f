package plan

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/synth"
)

// TestPlanOverRPC plans Llama-3.1-70B Q4_K_M on a 24 GB card joined by a
// host with two 24 GB cards over rpc-server: every layer fits on GPUs that
// way, the flags name the server and pin the split, and the remote cards
// are domains of their own, each left its fit target.
func TestPlanOverRPC(t *testing.T) {
	m := model(t, "llama-3.1-70b", synth.Q4_K_M)
	local, err := hw.LoadMachine("rtx-4090")
	if err != nil {
		t.Fatal(err)
	}
	remote, err := hw.LoadMachine("2x-rtx-3090")
	if err != nil {
		t.Fatal(err)
	}
	joined, err := hw.Join(local, []hw.Remote{{Endpoint: "10.0.0.2:50052", Snapshot: remote}})
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultSearch()
	o.Parallel = 1
	alone, err := Search(m, local, o)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Search(m, joined, o)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Chosen
	if c == nil || alone.Chosen == nil {
		t.Fatalf("no plan: %v / %v", p.Explain, alone.Explain)
	}
	if c.GPULayers != m.NLayer+1 || alone.Chosen.GPULayers >= c.GPULayers {
		t.Errorf("GPU layers: %d with the rpc host, %d alone; want all %d with it", c.GPULayers, alone.Chosen.GPULayers, m.NLayer+1)
	}
	i := slices.Index(c.Flags, "--rpc")
	j := slices.Index(c.Flags, "-ts")
	if i < 0 || c.Flags[i+1] != "10.0.0.2:50052" || j < 0 {
		t.Fatalf("flags %v: want --rpc 10.0.0.2:50052 and -ts", c.Flags)
	}
	sum := 0
	parts := strings.Split(c.Flags[j+1], ",")
	for _, s := range parts {
		n, _ := strconv.Atoi(s)
		sum += n
	}
	if len(parts) != 3 || sum != c.GPULayers {
		t.Errorf("-ts %s: want 3 devices (RPC0, RPC1, CUDA0) summing to %d layers", c.Flags[j+1], c.GPULayers)
	}
	// Each host's memory is checked on its own.
	seen := map[string]bool{}
	for _, d := range c.Result.Domains {
		if d.Required > 0 {
			seen[d.ID] = true
			if d.Margin < o.FitTarget {
				t.Errorf("domain %s left %d MiB, want at least the fit target", d.ID, d.Margin>>20)
			}
		}
	}
	for _, id := range []string{"gpu0", "10.0.0.2:50052/gpu0", "10.0.0.2:50052/gpu1"} {
		if !seen[id] {
			t.Errorf("domain %s carries nothing; charged: %v", id, seen)
		}
	}
	// The remote buffers are named as llama.cpp names RPC buffer types.
	var rpcBufs []string
	for _, b := range c.Result.Buffers {
		if strings.HasPrefix(b.Device, "RPC") {
			rpcBufs = append(rpcBufs, b.BufferType)
			// Every buffer on an RPC device, caches too, carries the
			// server's buffer type, not the device's name.
			if b.BufferType != b.Device+"[10.0.0.2:50052]" {
				t.Errorf("%s buffer on %s named %q", b.Kind, b.Device, b.BufferType)
			}
		}
	}
	if !slices.Contains(rpcBufs, "RPC0[10.0.0.2:50052]") || !slices.Contains(rpcBufs, "RPC1[10.0.0.2:50052]") {
		t.Errorf("RPC buffer types %v", rpcBufs)
	}
	if !slices.ContainsFunc(p.Explain, func(s string) bool { return strings.Contains(s, "rpc-server") }) {
		t.Errorf("the explanation does not mention the rpc host: %v", p.Explain)
	}
	t.Logf("alone: %v\njoined: %v", alone.Chosen.Flags, c.Flags)
}

// TestPlanOverSmallRPCHost plans Llama-3.1-8B Q4_K_M (4.6 GiB of weights)
// on a CPU-only machine and an rpc-server whose one device reported 3 or
// 6 GiB (figures smaller than any real card, so the split must matter):
// the remote device gets only what leaves it the fit target, and the
// explanation names the host that limits.
func TestPlanOverSmallRPCHost(t *testing.T) {
	m := model(t, "llama-3.1-8b", synth.Q4_K_M)
	local, err := hw.LoadMachine("cpu-32")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		remoteGiB uint64
		all       bool // every layer fits on the remote device
	}{
		{"3 GiB host", 3, false},
		{"6 GiB host", 6, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			probe := &hw.RPCServerInfo{Endpoint: "10.0.0.9:50052", Version: hw.RPCVersion{Major: 6}, Devices: []hw.RPCDeviceInfo{
				{Index: 0, Free: c.remoteGiB << 30, Total: c.remoteGiB << 30, Alignment: 32, MaxSize: ^uint64(0)},
			}}
			joined, err := hw.Join(local, []hw.Remote{{Endpoint: probe.Endpoint, Probe: probe}})
			if err != nil {
				t.Fatal(err)
			}
			o := DefaultSearch()
			o.Parallel = 1
			p, err := Search(m, joined, o)
			if err != nil || p.Chosen == nil {
				t.Fatalf("no plan: %v %v", err, p)
			}
			remote := "10.0.0.9:50052/dev0"
			for _, d := range p.Chosen.Result.Domains {
				if d.ID == remote && (d.Required <= 0 || d.Margin < o.FitTarget) {
					t.Errorf("remote domain: %d MiB required, %d MiB left; want some layers and the fit target left", d.Required>>20, d.Margin>>20)
				}
			}
			if all := p.Chosen.GPULayers > m.NLayer; all != c.all {
				t.Errorf("%d layers on a %d GiB remote device; want all: %v", p.Chosen.GPULayers, c.remoteGiB, c.all)
			}
			if !slices.ContainsFunc(p.Explain, func(s string) bool { return strings.Contains(s, "the limiting one is") }) {
				t.Errorf("the explanation does not name the limiting host: %v", p.Explain)
			}
			t.Logf("%v\n%s", p.Chosen.Flags, strings.Join(p.Explain, "\n"))
		})
	}
}
