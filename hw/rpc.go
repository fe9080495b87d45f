package hw

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

// BackendRPC is the backend of devices served by a remote rpc-server.
const BackendRPC = "RPC"

// Remote is a host running rpc-server, as its own 'headroom hw --json'
// describes it.
type Remote struct {
	// Endpoint is host:port, as llama-server's --rpc takes it.
	Endpoint string
	Snapshot *Snapshot
	// Probe, used when Snapshot is nil, is what the rpc-server itself
	// reported over the RPC protocol (ProbeRPC).
	Probe *RPCServerInfo
}

// Join returns the local machine with the devices of remote rpc-servers
// added, as llama-server started with --rpc sees them. Each rpc-server
// exposes its host's accelerators (one view per physical device, of the
// backend its build prefers), or its CPU when it has none; llama.cpp names
// them RPC0, RPC1, ... in --rpc order. A remote's memory domains join the
// snapshot under "ENDPOINT/ID", so each host's memory is counted
// separately. The receiver and the remotes are not changed.
func Join(local *Snapshot, remotes []Remote) (*Snapshot, error) {
	out := *local
	out.Domains = append([]Domain(nil), local.Domains...)
	out.Devices = append([]Device(nil), local.Devices...)
	out.RPC = append([]string(nil), local.RPC...)
	n := 0
	for _, d := range out.Devices {
		if d.Backend == BackendRPC {
			n++
		}
	}
	for _, r := range remotes {
		if err := checkEndpoint(r.Endpoint); err != nil {
			return nil, err
		}
		for _, e := range out.RPC {
			if e == r.Endpoint {
				return nil, fmt.Errorf("rpc endpoint %s is given twice", r.Endpoint)
			}
		}
		if r.Snapshot == nil && r.Probe != nil {
			n = joinProbe(&out, r.Endpoint, r.Probe, n)
			continue
		}
		if r.Snapshot == nil {
			return nil, fmt.Errorf("rpc endpoint %s: no snapshot of its host", r.Endpoint)
		}
		if err := r.Snapshot.Validate(); err != nil {
			return nil, fmt.Errorf("rpc endpoint %s: its snapshot: %w", r.Endpoint, err)
		}
		if len(r.Snapshot.RPC) > 0 {
			return nil, fmt.Errorf("rpc endpoint %s: its snapshot joins rpc-servers of its own; rpc-server does not forward them", r.Endpoint)
		}
		exposed := exposedDevices(r.Snapshot)
		used := map[string]bool{}
		for i, v := range exposed {
			dom := r.Snapshot.Domain(v.Domain)
			id := r.Endpoint + "/" + dom.ID
			if !used[dom.ID] {
				d := *dom
				d.ID = id
				d.Description = strings.TrimSpace(r.Endpoint + " " + dom.Description)
				out.Domains = append(out.Domains, d)
				used[dom.ID] = true
			}
			total, free := v.Total, v.Free
			if v.Type == TypeCPU {
				// The CPU backend reports the host's RAM.
				total = dom.Capacity
				if dom.Free != nil {
					f := *dom.Free
					free = &f
				}
			}
			out.Devices = append(out.Devices, Device{
				Name: "RPC" + strconv.Itoa(n), Backend: BackendRPC, Type: TypeGPU, Domain: id,
				Description: r.Endpoint + " " + v.Name, Total: total, Free: free, MaxAlloc: v.MaxAlloc, Alignment: v.Alignment,
				PhysicalID: r.Endpoint + "/" + v.Name, Source: "rpc-server " + r.Endpoint + ": " + v.Name + " of its snapshot",
				Endpoint: r.Endpoint, RemoteIndex: i,
			})
			n++
		}
		out.RPC = append(out.RPC, r.Endpoint)
		out.Notes = append(out.Notes, fmt.Sprintf("%s: %d device(s) over rpc-server (%s)", r.Endpoint, len(exposed), names(exposed)))
	}
	if err := out.Validate(); err != nil {
		return nil, err
	}
	return &out, nil
}

// joinProbe adds the devices an rpc-server reported of itself, each with a
// domain of its own (the protocol does not say which of a server's devices
// share memory, nor whether a device is a GPU or the host's CPU, whose
// report is the host's RAM), and returns the next global device number.
func joinProbe(out *Snapshot, endpoint string, p *RPCServerInfo, n int) int {
	src := fmt.Sprintf("rpc-server %s itself, over the RPC protocol (v%s): GET_DEVICE_MEMORY, GET_ALIGNMENT", endpoint, p.Version)
	for _, d := range p.Devices {
		id := endpoint + "/dev" + strconv.Itoa(d.Index)
		free := int64(min(d.Free, 1<<62))
		out.Domains = append(out.Domains, Domain{
			ID: id, Kind: KindDevice, Description: fmt.Sprintf("%s device %d", endpoint, d.Index),
			Capacity: int64(min(d.Total, 1<<62)), Free: &free, Source: src,
		})
		f := free
		out.Devices = append(out.Devices, Device{
			Name: "RPC" + strconv.Itoa(n), Backend: BackendRPC, Type: TypeGPU, Domain: id,
			Description: fmt.Sprintf("%s device %d", endpoint, d.Index), Total: int64(min(d.Total, 1<<62)), Free: &f,
			Alignment: int64(d.Alignment), Source: src, Endpoint: endpoint, RemoteIndex: d.Index,
		})
		n++
	}
	out.RPC = append(out.RPC, endpoint)
	out.Notes = append(out.Notes, fmt.Sprintf("%s: %d device(s) as the rpc-server reported them (protocol %s; largest buffer %s)", endpoint, len(p.Devices), p.Version, maxSizes(p.Devices)))
	return n
}

func maxSizes(ds []RPCDeviceInfo) string {
	var out []string
	for _, d := range ds {
		if d.MaxSize >= 1<<62 {
			out = append(out, "unbounded")
		} else {
			out = append(out, strconv.FormatUint(d.MaxSize>>20, 10)+" MiB")
		}
	}
	return strings.Join(out, ", ")
}

// exposedDevices are the devices rpc-server offers: every accelerator,
// one view per physical device in the backend order llama.cpp builds
// prefer, else the CPU.
func exposedDevices(s *Snapshot) []Device {
	byBackend := map[string][]Device{}
	var cpu Device
	for _, d := range s.Devices {
		if d.Type == TypeCPU {
			cpu = d
			continue
		}
		byBackend[d.Backend] = append(byBackend[d.Backend], d)
	}
	for _, b := range []string{"CUDA", "ROCm", "Metal", "Vulkan", "SYCL"} {
		if g := byBackend[b]; len(g) > 0 {
			sort.Slice(g, func(i, j int) bool { return g[i].Name < g[j].Name })
			return g
		}
	}
	return []Device{cpu}
}

func names(ds []Device) string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return strings.Join(out, ", ")
}

func checkEndpoint(e string) error {
	host, port, err := net.SplitHostPort(e)
	if err != nil || host == "" {
		return fmt.Errorf("rpc endpoint %q: expected host:port", e)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("rpc endpoint %q: port %q is not a number from 1 to 65535", e, port)
	}
	return nil
}
