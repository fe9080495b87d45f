package hw

import (
	"fmt"
	"strings"

	"github.com/headroom-llm/headroom/internal/units"
)

// vendorBackend is the llama.cpp backend each vendor's GPUs are usually run
// with, and the device name prefix it registers. It names views only when
// llama-server was not there to name them itself.
func vendorBackend(vendor string) (backend, prefix string) {
	switch vendor {
	case "nvidia":
		return "CUDA", "CUDA"
	case "amd":
		return "ROCm", "ROCm"
	case "intel":
		return "SYCL", "SYCL"
	case "apple":
		return "Metal", "MTL"
	}
	return "Vulkan", "Vulkan"
}

// assemble shapes what the probes found into a snapshot: one system (or
// unified) domain, one domain per discrete GPU, and the device views bound
// to them, named by llama-server where it answered.
func (m *machine) assemble() *Snapshot {
	s := &Snapshot{Schema: Schema, Source: SourceProbe}
	for i, g := range m.gpus {
		g.physical = fmt.Sprintf("%s-gpu%d", g.vendor, i)
		if g.busID != "" {
			g.physical = "pci:" + g.busID
		}
	}
	sys := Domain{ID: "ram", Kind: KindSystem, Description: "system RAM", Capacity: m.host.total,
		Swap: m.host.swap, Source: m.host.source}
	if m.host.avail != nil {
		sys.Free = ptr(*m.host.avail)
	}
	usable := m.host.limit
	for _, g := range m.gpus {
		if !g.unified {
			continue
		}
		sys.ID, sys.Kind, sys.Description = "unified", KindUnified, "unified memory (CPU and "+g.name+")"
		// The carve-out is RAM the OS never counts; it belongs to the pool.
		sys.Capacity += g.carveout
		if sys.Free != nil {
			*sys.Free += g.carveFree
		}
		if g.usable > 0 && (usable == 0 || g.usable < usable) {
			usable = g.usable
		}
		sys.Source += "; " + g.source
		if sys.BandwidthGBps == 0 {
			sys.BandwidthGBps, sys.BandwidthSource = knownBandwidth(g.name, sys.Capacity)
		}
	}
	if usable < sys.Capacity {
		sys.Usable = usable
	}
	s.Domains = append(s.Domains, sys)

	domainOf := map[*gpu]string{}
	for _, g := range m.gpus {
		if g.unified {
			domainOf[g] = sys.ID
			continue
		}
		id := fmt.Sprintf("gpu%d", len(s.Domains)-1)
		d := Domain{ID: id, Kind: KindDevice, Description: g.name, Capacity: g.total, Source: g.source}
		if g.free != nil {
			d.Free = ptr(*g.free)
		}
		d.BandwidthGBps, d.BandwidthSource = knownBandwidth(g.name, g.total)
		s.Domains = append(s.Domains, d)
		domainOf[g] = id
	}

	cpu := Device{Name: "CPU", Backend: "CPU", Description: m.host.cpu, Type: TypeCPU, Domain: sys.ID,
		Total: m.host.total, Free: m.host.cpuFree, Features: m.host.features, Source: "llama.cpp always has a CPU device; total as ggml's CPU backend reports it"}
	if cpu.Free != nil {
		cpu.Source += ", and free too: on Linux it counts all of RAM as free"
	}
	if cpu.Description == "" {
		cpu.Description = "host CPU"
	}
	s.Devices = append(s.Devices, cpu)
	if m.native != nil {
		m.nativeViews(s, domainOf)
	} else {
		m.inferredViews(s, domainOf)
	}
	m.attachProcesses(s, domainOf)
	s.Notes = append(s.Notes, m.notes...)
	return s
}

// inferredViews names each GPU's views as llama.cpp usually does for its
// vendor, plus Vulkan0 when there is one GPU and no doubt which it is.
func (m *machine) inferredViews(s *Snapshot, domainOf map[*gpu]string) {
	count := map[string]int{}
	for _, g := range m.gpus {
		backend, prefix := vendorBackend(g.vendor)
		d := Device{Name: fmt.Sprintf("%s%d", prefix, count[prefix]), Backend: backend, Description: g.name,
			Type: TypeGPU, Domain: domainOf[g], HostBuffer: hostBufferOf(backend), PhysicalID: g.physical,
			Source: "inferred: llama.cpp's usual name for this GPU under " + backend}
		count[prefix]++
		switch {
		case g.vendor == "apple":
			// Metal reports its working set as the device total.
			d.Type, d.Total = TypeIGPU, g.usable
			d.Source += "; total: Metal's working set"
		case g.unified:
			d.Type = TypeIGPU
		default:
			d.Total = g.total
			if g.free != nil {
				d.Free = ptr(*g.free)
			}
			d.Source += "; memory: " + g.source
		}
		s.Devices = append(s.Devices, d)
		if len(m.gpus) == 1 && g.vendor != "apple" {
			v := d
			v.Name, v.Backend, v.HostBuffer, v.Free = "Vulkan0", "Vulkan", hostBufferOf("Vulkan"), nil
			v.Source = "inferred: llama.cpp's name for the only GPU under Vulkan"
			if g.unified {
				v.Total = 0 // Vulkan sums every heap of an integrated GPU; unknown here
			} else {
				v.Source += "; total: the card's memory, which Vulkan reports as its device-local heap"
			}
			s.Devices = append(s.Devices, v)
		}
	}
	if len(m.gpus) > 0 {
		m.notef("device names are inferred from the GPU vendors (CUDA for NVIDIA, ROCm for AMD, SYCL for Intel, Metal for Apple); with llama-server on PATH they are read from the engine itself")
	}
}

// nativeViews takes the device views from llama-server --list-devices and
// binds each to the probed GPU it is a view of: same vendor, the name it
// reports, and otherwise the vendor's GPUs in order. One GPU may get a view
// from each backend (CUDA0 and Vulkan0); a device no probe saw gets a
// domain of its own from the engine's figures.
func (m *machine) nativeViews(s *Snapshot, domainOf map[*gpu]string) {
	taken := map[string]map[*gpu]bool{}
	seen := map[*gpu]bool{}
	for _, nd := range m.native.devices {
		backend := backendOf(nd.name)
		if taken[backend] == nil {
			taken[backend] = map[*gpu]bool{}
		}
		g := m.match(nativeVendor(backend, nd.desc), nd.desc, taken[backend])
		d := Device{Name: nd.name, Backend: backend, Description: nd.desc, Type: TypeGPU,
			HostBuffer: hostBufferOf(backend), Total: nd.total, Free: ptr(nd.free), Source: "llama-server --list-devices"}
		knownLimits(&d)
		switch {
		case g != nil:
			taken[backend][g], seen[g] = true, true
			d.Domain, d.PhysicalID = domainOf[g], g.physical
			if g.unified {
				d.Type = TypeIGPU
			}
			if dom := s.Domain(d.Domain); dom.BandwidthGBps == 0 {
				dom.BandwidthGBps, dom.BandwidthSource = knownBandwidth(nd.desc, dom.Capacity)
			}
			if g.vendor == "apple" && nd.total > 0 {
				sys := &s.Domains[0]
				// The live reading replaces the default fraction or the sysctl.
				sys.Usable = min(nd.total, sys.Capacity)
				sys.Source = m.host.source + "; usable: Metal's recommendedMaxWorkingSetSize, read live from llama-server --list-devices"
			}
		case nd.total > 0:
			id := fmt.Sprintf("gpu%d", len(s.Domains)-1)
			s.Domains = append(s.Domains, Domain{ID: id, Kind: KindDevice, Description: nd.desc, Capacity: nd.total,
				Free: ptr(nd.free), Source: "llama-server --list-devices (no other probe saw this device)"})
			d.Domain, d.PhysicalID = id, strings.ToLower(backend)+"-only:"+nd.name
		default:
			// A device reporting no memory of its own is given host memory by
			// llama.cpp's layer split.
			d.Domain = s.Domains[0].ID
		}
		s.Devices = append(s.Devices, d)
	}
	for _, g := range m.gpus {
		if !seen[g] {
			m.notef("%s (%s) is not among llama-server's devices: this llama.cpp build has no backend for it", g.name, domainOf[g])
		}
	}
}

// match picks the probed GPU a native view shows: one of the vendor's GPUs
// not yet taken by this backend, preferring one whose name the description
// contains.
func (m *machine) match(vendor, desc string, taken map[*gpu]bool) *gpu {
	var first *gpu
	for _, g := range m.gpus {
		if g.vendor != vendor || taken[g] {
			continue
		}
		if g.name != "" && strings.Contains(strings.ToLower(desc), strings.ToLower(g.name)) {
			return g
		}
		if first == nil {
			first = g
		}
	}
	return first
}

// nativeVendor tells whose device a native view is, from its backend or,
// for Vulkan and the like, its description.
func nativeVendor(backend, desc string) string {
	switch backend {
	case "CUDA":
		return "nvidia"
	case "ROCm", "HIP":
		return "amd"
	case "Metal":
		return "apple"
	}
	d := strings.ToLower(desc)
	switch {
	case strings.Contains(d, "nvidia"):
		return "nvidia"
	case strings.Contains(d, "amd") || strings.Contains(d, "radeon"):
		return "amd"
	case strings.Contains(d, "intel"):
		return "intel"
	case strings.Contains(d, "apple"):
		return "apple"
	}
	return ""
}

// attachProcesses puts each GPU's processes on its first view, counts the
// desktop's share as reserved in its domain, and says what stopping them
// would give back.
func (m *machine) attachProcesses(s *Snapshot, domainOf map[*gpu]string) {
	for _, g := range m.gpus {
		if len(g.processes) == 0 {
			continue
		}
		var view *Device
		for j := range s.Devices {
			if s.Devices[j].PhysicalID == g.physical {
				view = &s.Devices[j]
				break
			}
		}
		label := g.name
		if view != nil {
			view.Processes = g.processes
			label = view.Name
		}
		var desktop, other int64
		var desktopNames, otherNames []string
		for _, p := range g.processes {
			part := fmt.Sprintf("%s %s", baseName(p.Name), units.Size(p.Bytes))
			if p.Desktop() {
				desktop += p.Bytes
				desktopNames = append(desktopNames, part)
			} else {
				other += p.Bytes
				otherNames = append(otherNames, part)
			}
		}
		if desktop > 0 {
			s.Domain(domainOf[g]).Reserved += desktop
			m.notef("desktop session holds %s on %s (%s); running headless would recover it",
				units.Size(desktop), label, strings.Join(desktopNames, ", "))
		}
		if other > 0 {
			m.notef("other processes hold %s on %s (%s); it is not free until they exit",
				units.Size(other), label, strings.Join(otherNames, ", "))
		}
	}
}

// baseName shortens a process path for a note.
func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 && i < len(p)-1 {
		return p[i+1:]
	}
	return p
}

// knownLimits fills in the device-local limits --list-devices does not
// report, for devices whose limits are fixed by their driver. Mesa's
// llvmpipe (the software Vulkan device) binds at most 128 MiB
// (maxStorageBufferRange), so a larger weight or KV tensor cannot live on
// it: llama.cpp keeps such a weight on the CPU and aborts a load whose KV
// tensor is larger. Its buffers align to 16 bytes
// (minStorageBufferOffsetAlignment) and its host buffers to 64
// (minMemoryMapAlignment), as the engine's allocator trace shows.
func knownLimits(d *Device) {
	if d.Backend == "Vulkan" && strings.Contains(d.Description, "llvmpipe") {
		d.MaxAlloc, d.Alignment, d.HostAlignment = 128<<20, 16, 64
		d.Source += "; llvmpipe's fixed limits: 128 MiB binding (maxStorageBufferRange), 16-byte buffer and 64-byte host alignment"
	}
}
