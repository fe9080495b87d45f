package plan

import "fmt"

// BackendNote says whether headroom's figures for one GPU backend were
// measured against llama.cpp, and on which devices of the machine.
type BackendNote struct {
	Backend  string   `json:"backend"`
	Devices  []string `json:"devices"`
	Measured bool     `json:"measured"`
	Says     string   `json:"says"`
}

// Measured says whether llama-server loads on backend are among the
// golden cases the accounting is held to, and which. A backend with none
// is planned from llama.cpp's source for it alone: its figures are
// estimates, whatever the scheduler model reproduces elsewhere.
// conformance's TestMeasuredBackends keeps this list and the golden sets
// in step.
func Measured(backend string) (where string, ok bool) {
	switch backend {
	case "CPU":
		return "llama-server on the CPU (conformance/testdata/server, docs/accuracy.md)", true
	case "Vulkan":
		return "llama-server on Vulkan over Mesa llvmpipe (conformance/testdata/server, docs/accuracy.md)", true
	case "RPC":
		return "llama-server over ggml-rpc-server on loopback (conformance/testdata/server)", true
	}
	return "", false
}

// Backends notes each GPU backend of gpus, in device order.
func Backends(gpus []Device) []BackendNote {
	var out []BackendNote
	at := map[string]int{}
	for _, g := range gpus {
		if i, ok := at[g.Backend]; ok {
			out[i].Devices = append(out[i].Devices, g.Name)
			continue
		}
		n := BackendNote{Backend: g.Backend, Devices: []string{g.Name}}
		if where, ok := Measured(g.Backend); ok {
			n.Measured = true
			n.Says = fmt.Sprintf("%s figures are held to measured loads: %s", g.Backend, where)
		} else {
			n.Says = fmt.Sprintf("no %s load is among headroom's measured cases: its buffers follow llama.cpp's source for %s and are estimates (public %s logs are compared in docs/accuracy-public.md%s); fit or plan --verify asks your llama.cpp, whose projection is exact for your device", g.Backend, g.Backend, g.Backend, checkedApart(g.Backend))
		}
		at[g.Backend] = len(out)
		out = append(out, n)
	}
	return out
}

// checkedApart is what of a backend without measured loads is checked
// another way.
func checkedApart(backend string) string {
	if backend == "Metal" {
		return "; its graph reorder equals llama.cpp's own reorder code run on the CPU, conformance/metalemu"
	}
	return ""
}
