// Package hw describes the machine a model would run on, in the terms that
// decide whether it fits: physical memory domains (system RAM, each discrete
// GPU's memory, a unified pool shared by CPU and GPU), the device views
// llama.cpp names (CPU, CUDA0, Vulkan0, MTL0, ROCm0, SYCL0, ...), and the
// bindings that say which domain each view draws from.
//
// A snapshot comes from probing this machine (Probe), from a built-in preset
// for what-if planning (LoadMachine("rtx-4090")), or from a JSON file in the
// shape 'headroom hw --json' prints (LoadMachine("box.json")). Accounting
// resolves every buffer's device to its domain through the bindings
// (Snapshot.DomainOf, Snapshot.Tally), never from a platform label: on an
// Apple Silicon Mac the CPU and MTL0 views charge one unified domain, on a
// box with two RTX 3090s CPU, CUDA0 and CUDA1 charge three.
package hw

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Schema is the version of the snapshot JSON shape that this package writes
// and reads.
const Schema = 1

// Domain kinds.
const (
	// KindSystem is system RAM that no accelerator draws from.
	KindSystem = "system"
	// KindDevice is memory local to one discrete device (a GPU's VRAM).
	KindDevice = "device"
	// KindUnified is one physical pool that the CPU and an integrated
	// accelerator both draw from (Apple Silicon, AMD APUs, GB10).
	KindUnified = "unified"
)

// Device types, as ggml_backend_dev_type names them.
const (
	TypeCPU  = "cpu"
	TypeGPU  = "gpu"
	TypeIGPU = "igpu"
)

// Snapshot sources.
const (
	SourceProbe  = "probe"
	SourcePreset = "preset"
	SourceFile   = "file"
)

// Snapshot is a machine as the fit planner sees it. The JSON form (snake_case,
// byte figures as integers with a _bytes suffix) is what 'headroom hw --json'
// prints and what --machine FILE reads.
type Snapshot struct {
	Schema int       `json:"schema"`
	Host   string    `json:"host,omitempty"`
	Source string    `json:"source"`           // probe, preset or file
	Preset string    `json:"preset,omitempty"` // the preset's name, for Source preset
	Taken  time.Time `json:"taken,omitzero"`
	// Hardware names the hardware a probe found: the CPU model, the size
	// of system memory and each GPU's vendor, name and memory. Speed
	// measurements of this machine are kept under it, so a new DIMM or
	// another card starts afresh. Presets have none.
	Hardware string   `json:"hardware,omitempty"`
	Domains  []Domain `json:"domains"`
	Devices  []Device `json:"devices"`
	// RPC lists the rpc-server endpoints (host:port) whose devices this
	// machine uses, in the order llama-server's --rpc takes them; see Join.
	RPC   []string `json:"rpc,omitempty"`
	Notes []string `json:"notes,omitempty"`
}

// Domain is one physical pool of memory.
type Domain struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"` // KindSystem, KindDevice or KindUnified
	Description string `json:"description,omitempty"`
	// Capacity is the physical size as the operating system or driver
	// reports it.
	Capacity int64 `json:"capacity_bytes"`
	// Free is what was free when the snapshot was taken; nil when it was not
	// observed (presets describe an idle machine, not a moment).
	Free *int64 `json:"free_bytes,omitempty"`
	// Usable is the share a backend may use when it is less than Capacity:
	// Metal's recommended working set, a cgroup limit, an APU's GTT limit.
	// Zero means all of Capacity.
	Usable int64 `json:"usable_bytes,omitempty"`
	// Reserved is memory held by a desktop session (compositor, browser)
	// that running headless would give back. It is already absent from Free.
	Reserved int64 `json:"reserved_bytes,omitempty"`
	// Swap is noted for the reader and never counted as room: a model that
	// only fits by swapping does not fit.
	Swap int64 `json:"swap_bytes,omitempty"`
	// BandwidthGBps is the memory bandwidth in GB/s (10^9 bytes), 0 when
	// unknown.
	BandwidthGBps float64 `json:"bandwidth_gbps,omitempty"`
	// Source says where the capacity, free and usable figures came from;
	// BandwidthSource does the same for the bandwidth.
	Source          string `json:"source"`
	BandwidthSource string `json:"bandwidth_source,omitempty"`
}

// Device is one device view as llama.cpp names it. Several views may be
// different backends' names for one physical device (CUDA0 and Vulkan0 for
// one card share a PhysicalID), and several views may draw from one domain
// (CPU and MTL0 on a Mac).
type Device struct {
	Name        string `json:"name"`    // CPU, CUDA0, Vulkan0, MTL0, ROCm0, SYCL0, ...
	Backend     string `json:"backend"` // CPU, CUDA, Vulkan, Metal, ROCm, SYCL
	Description string `json:"description,omitempty"`
	Type        string `json:"type"`   // TypeCPU, TypeGPU or TypeIGPU
	Domain      string `json:"domain"` // the ID of the domain this view draws from
	// Total and Free are what the backend itself reports
	// (ggml_backend_dev_memory), which is what llama.cpp's --fit reads.
	// They can differ from the domain's figures: Metal reports its working
	// set, Vulkan on an integrated GPU sums every memory heap, and the CPU
	// backend on Linux reports all of RAM as free. Zero or nil: not reported.
	Total int64  `json:"total_bytes,omitempty"`
	Free  *int64 `json:"free_bytes,omitempty"`
	// MaxAlloc is the largest single buffer the device accepts (Vulkan's
	// maxStorageBufferRange, Metal's maxBufferLength); zero when unknown.
	MaxAlloc int64 `json:"max_alloc_bytes,omitempty"`
	// Alignment is the offset alignment of the device's own buffers
	// (Vulkan's minStorageBufferOffsetAlignment) and HostAlignment that of
	// its pinned host buffers (Vulkan's minMemoryMapAlignment); ggml's
	// allocator rounds every compute tensor up to them. Zero: the
	// backend's usual value.
	Alignment     int64 `json:"alignment_bytes,omitempty"`
	HostAlignment int64 `json:"host_alignment_bytes,omitempty"`
	// HostBuffer names the backend's pinned host buffer type (CUDA_Host,
	// Vulkan_Host), whose allocations live in system memory.
	HostBuffer string `json:"host_buffer,omitempty"`
	// PhysicalID identifies the physical device (a PCI address where known),
	// so that two backends' views of one card are recognizably one.
	PhysicalID string `json:"physical_id,omitempty"`
	// Features are a CPU view's instruction sets (avx2, avx512, neon,
	// dotprod, i8mm, ...), which decide the weights ggml repacks; empty when
	// not probed.
	Features []string `json:"features,omitempty"`
	// Processes holds other processes' use of this device, where the driver
	// reports it.
	Processes []Process `json:"processes,omitempty"`
	Source    string    `json:"source,omitempty"`
	// Endpoint is the rpc-server (host:port) an RPC device is served by,
	// and RemoteIndex its index among that server's devices.
	Endpoint    string `json:"endpoint,omitempty"`
	RemoteIndex int    `json:"remote_index,omitempty"`
}

// Process is another process's use of a device's memory.
type Process struct {
	PID   int    `json:"pid"`
	Name  string `json:"name"`
	Use   string `json:"use"` // graphics, compute, or graphics+compute (nvidia-smi's G, C, C+G)
	Bytes int64  `json:"bytes"`
}

// Desktop reports whether the process draws graphics, which is what a
// compositor, an X server or a browser does and a headless server does not.
func (p Process) Desktop() bool { return strings.Contains(p.Use, "graphics") }

// Available is what the domain can give a new allocation: the usable share,
// or less if less was free when the snapshot was taken.
func (d *Domain) Available() int64 {
	n := d.Capacity
	if d.Usable > 0 && d.Usable < n {
		n = d.Usable
	}
	if d.Free != nil && *d.Free < n {
		n = *d.Free
	}
	return max(n, 0)
}

// WriteJSON writes the snapshot as indented JSON, the form 'headroom hw
// --json' prints and LoadMachine reads back. Sources quote commands and
// comparisons, so HTML escaping is off to keep them legible.
func (s *Snapshot) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(s)
}

// Domain returns the domain with the given ID, or nil.
func (s *Snapshot) Domain(id string) *Domain {
	for i := range s.Domains {
		if s.Domains[i].ID == id {
			return &s.Domains[i]
		}
	}
	return nil
}

// Device returns the device view with the given name, or nil.
func (s *Snapshot) Device(name string) *Device {
	for i := range s.Devices {
		if s.Devices[i].Name == name {
			return &s.Devices[i]
		}
	}
	return nil
}

// Views lists the names of the device views bound to a domain, in snapshot
// order.
func (s *Snapshot) Views(domainID string) []string {
	var names []string
	for _, d := range s.Devices {
		if d.Domain == domainID {
			names = append(names, d.Name)
		}
	}
	return names
}

// cpu returns the CPU view, which every snapshot has.
func (s *Snapshot) cpu() *Device {
	for i := range s.Devices {
		if s.Devices[i].Type == TypeCPU {
			return &s.Devices[i]
		}
	}
	return nil
}

// ResolveDevice names the device view that owns an allocation llama.cpp
// labels with name, which may be a device (CUDA0), a buffer type of a device
// (CPU_Mapped, CPU_REPACK, MTL0_Mapped), a backend's pinned host buffer type
// (CUDA_Host, Vulkan_Host: system memory, so the CPU view), or "Host", the
// sum of host buffers in llama.cpp's memory breakdown.
func (s *Snapshot) ResolveDevice(name string) (*Device, error) {
	if d := s.Device(name); d != nil {
		return d, nil
	}
	host := name == "Host" || name == "AMX" // AMX is a CPU extra buffer type
	for _, d := range s.Devices {
		if d.HostBuffer != "" && d.HostBuffer == name {
			host = true
		}
	}
	if host {
		if c := s.cpu(); c != nil {
			return c, nil
		}
	}
	if prefix, _, ok := strings.Cut(name, "_"); ok {
		if d := s.Device(prefix); d != nil {
			return d, nil
		}
	}
	names := make([]string, len(s.Devices))
	for i, d := range s.Devices {
		names[i] = d.Name
	}
	return nil, fmt.Errorf("hw: %q is neither a device view nor a buffer type of this machine (devices: %s)",
		name, strings.Join(names, ", "))
}

// DomainOf resolves a device view or buffer type name (see ResolveDevice) to
// the physical domain it draws from, through the snapshot's bindings.
func (s *Snapshot) DomainOf(name string) (*Domain, error) {
	d, err := s.ResolveDevice(name)
	if err != nil {
		return nil, err
	}
	dom := s.Domain(d.Domain)
	if dom == nil {
		return nil, fmt.Errorf("hw: device %s is bound to domain %q, which the snapshot does not have", d.Name, d.Domain)
	}
	return dom, nil
}

// backendOf derives a backend from a llama.cpp device name: the name without
// its trailing index, with Metal's MTL prefix spelled out.
func backendOf(name string) string {
	b := strings.TrimRightFunc(name, func(r rune) bool { return r >= '0' && r <= '9' })
	if b == "MTL" || b == "Metal" {
		return "Metal"
	}
	return b
}

// hostBufferOf is the pinned host buffer type a backend registers, named as
// ggml names it (GGML_CUDA_NAME "_Host" and so on). Metal and CPU have none.
func hostBufferOf(backend string) string {
	switch backend {
	case "CUDA", "ROCm", "Vulkan", "SYCL", "MUSA", "CANN":
		return backend + "_Host"
	}
	return ""
}

func ptr[T any](v T) *T { return &v }
