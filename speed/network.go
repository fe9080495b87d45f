package speed

import (
	"fmt"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

// DefaultNetworkGbps is the link assumed between this machine and its
// rpc-servers when none is given: gigabit Ethernet, the slowest link such
// a setup is likely to have.
const DefaultNetworkGbps = 1.0

// Network is what one generated token moves between hosts over llama.cpp's
// RPC backend, and how long that takes on the given link.
type Network struct {
	// Crossings lists each place the activations change hosts, in order
	// ("CPU -> RPC0[10.0.0.2:50052]").
	Crossings []string `json:"crossings"`
	// BytesPerToken is what crosses the network for one token: n_embd f32
	// activations per crossing (twice where both sides are rpc-servers:
	// ggml-rpc copies between two servers through this machine), and
	// n_vocab f32 logits back when the output layer is remote.
	BytesPerToken int64   `json:"bytes_per_token"`
	Gbps          float64 `json:"gbps"`
	GbpsSource    string  `json:"gbps_source"`
	// Ms is BytesPerToken at Gbps; per-message latency is not included.
	Ms float64 `json:"ms_per_token"`
}

// NetworkTraffic returns the network cost of a token for plan r of model m
// on machine s (a machine joined with rpc-servers), at gbps Gbit/s (0: the
// default, said in GbpsSource). nil when no layer runs on a remote host.
func NetworkTraffic(m *arch.Model, r *plan.Result, s *hw.Snapshot, gbps float64) (*Network, error) {
	if m == nil || r == nil || s == nil {
		return nil, fmt.Errorf("speed: model, plan and machine are all needed")
	}
	if gbps < 0 {
		return nil, fmt.Errorf("speed: network bandwidth %g Gbit/s, expected a positive figure", gbps)
	}
	n := &Network{Gbps: gbps, GbpsSource: "given"}
	if gbps == 0 {
		n.Gbps, n.GbpsSource = DefaultNetworkGbps, "assumed: gigabit Ethernet, no figure given"
	}
	// host is the rpc-server a device is on, "" for this machine.
	host := func(dev string) string {
		if d := s.Device(dev); d != nil {
			return d.Endpoint
		}
		return ""
	}
	act := int64(m.NEmbd) * 4
	// The token's embedding is looked up here (token_embd stays in host
	// memory), so the first layer's host is the first crossing.
	prev, prevDev := "", "CPU"
	remote := false
	for _, dev := range r.LayerDevice {
		h := host(dev)
		remote = remote || h != ""
		if h != prev {
			times := int64(1)
			if prev != "" && h != "" {
				times = 2
			}
			n.BytesPerToken += times * act
			n.Crossings = append(n.Crossings, prevDev+" -> "+dev)
		}
		prev, prevDev = h, dev
	}
	if !remote {
		return nil, nil
	}
	if prev != "" {
		// The logits of the output layer are read back here.
		n.BytesPerToken += int64(m.NVocab) * 4
		n.Crossings = append(n.Crossings, prevDev+" -> CPU (logits)")
	}
	n.Ms = float64(n.BytesPerToken) * 8 / (n.Gbps * 1e9) * 1e3
	return n, nil
}
