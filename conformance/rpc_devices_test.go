package conformance_test

import (
	"regexp"
	"strconv"

	"github.com/headroom-llm/headroom/conformance"
	"github.com/headroom-llm/headroom/plan"
)

// rpcBanner is the device line an rpc-server prints when it starts
// (ggml_backend_rpc_start_server): its name, description, total and free
// MiB.
var rpcBanner = regexp.MustCompile(`^\s+(\S+): .* \((\d+) MiB, (\d+) MiB free\)$`)

// rpcDevices are the remote devices of an RPC case as llama-server saw
// them: one per rpc-server (each served its CPU), named RPC0, RPC1, ...
// across servers in --rpc order, each with the buffer type
// ggml_backend_rpc_buffer_type names by the server's own device index and
// endpoint. The CPU backend behind each keeps TENSOR_ALIGNMENT (32), which
// is what the client's GET_ALIGNMENT returns.
func rpcDevices(c *conformance.Case) []plan.Device {
	var out []plan.Device
	for i, ep := range c.RPCEndpoints() {
		d := plan.Device{Name: "RPC" + strconv.Itoa(i), Backend: "RPC", Endpoint: ep, Buft: "RPC0[" + ep + "]", Align: 32}
		for _, s := range c.Engine.RPCServers {
			if s.Endpoint != ep {
				continue
			}
			for _, l := range s.Lines {
				if m := rpcBanner.FindStringSubmatch(l); m != nil {
					free, _ := strconv.ParseInt(m[3], 10, 64)
					d.Free = free << 20
				}
			}
		}
		out = append(out, d)
	}
	return out
}
