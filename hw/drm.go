package hw

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/internal/units"
)

// PCI vendor IDs as sysfs spells them.
const (
	pciAMD    = 0x1002
	pciNVIDIA = 0x10de
	pciIntel  = 0x8086
)

var cardName = regexp.MustCompile(`^card\d+$`)

// probeDRM walks /sys/class/drm for AMD and Intel GPUs, whose drivers
// publish memory sizes in sysfs. NVIDIA cards are nvidia-smi's; one seen
// here without nvidia-smi's answer is noted.
func probeDRM(root fs.FS, m *machine) []*gpu {
	entries, err := fs.ReadDir(root, "sys/class/drm")
	if err != nil {
		return nil
	}
	nvidiaSeen := false
	for _, g := range m.gpus {
		nvidiaSeen = nvidiaSeen || g.vendor == "nvidia"
	}
	var gpus []*gpu
	for _, e := range entries {
		if !cardName.MatchString(e.Name()) {
			continue // connectors (card0-DP-1) and render nodes
		}
		card := path.Join("sys/class/drm", e.Name())
		vendor, ok := readInt(root, card+"/device/vendor")
		if !ok {
			continue
		}
		uevent := readUevent(root, card+"/device/uevent")
		slot := strings.ToLower(uevent["PCI_SLOT_NAME"])
		switch vendor {
		case pciAMD:
			if g := probeAMD(root, card, slot, uevent["PCI_ID"]); g != nil {
				gpus = append(gpus, g)
			}
		case pciIntel:
			if g := probeIntel(root, card, slot, uevent); g != nil {
				gpus = append(gpus, g)
			} else {
				m.notef("Intel GPU %s (%s) publishes no memory size in sysfs; it is left out", slot, uevent["PCI_ID"])
			}
		case pciNVIDIA:
			if !nvidiaSeen {
				m.notef("NVIDIA GPU at %s, but nvidia-smi did not describe it; its memory is unknown and it is left out", slot)
			}
		}
	}
	return gpus
}

// probeAMD reads amdgpu's mem_info_* files (bytes). An APU's VRAM is a BIOS
// carve-out of system RAM and its GPU allocates mostly from GTT, so it is a
// unified pool whose GPU share is carve-out plus GTT limit.
func probeAMD(root fs.FS, card, slot, pciID string) *gpu {
	dev := card + "/device/"
	vram, ok := readInt(root, dev+"mem_info_vram_total")
	if !ok {
		return nil
	}
	vramUsed, _ := readInt(root, dev+"mem_info_vram_used")
	gtt, _ := readInt(root, dev+"mem_info_gtt_total")
	name := readString(root, dev+"product_name")
	if name == "" {
		name = "AMD GPU " + strings.ToLower(pciID)
	}
	g := &gpu{vendor: "amd", name: name, busID: slot}
	apu, why := amdIsAPU(root, slot, vram, gtt)
	if !apu {
		g.total, g.free = vram, ptr(max(vram-vramUsed, 0))
		g.source = "amdgpu sysfs mem_info_vram_total, mem_info_vram_used"
		return g
	}
	g.unified = true
	g.carveout, g.carveFree = vram, max(vram-vramUsed, 0)
	g.usable = vram + gtt
	g.source = fmt.Sprintf("%s is an APU (%s): GPU share = VRAM carve-out %s + GTT limit %s (mem_info_vram_total, mem_info_gtt_total)",
		name, why, units.Size(vram), units.Size(gtt))
	return g
}

// amdIsAPU tells an APU from a discrete card. KFD's topology is the better
// witness: an APU's GPU node has SIMDs but no local memory of its own. Without
// it, a GTT limit of at least 8x VRAM is taken as a carve-out-sized VRAM (the
// rule LocalAI uses), which a small discrete card in a large-RAM host can
// fool; the source says which rule decided.
func amdIsAPU(root fs.FS, slot string, vram, gtt int64) (bool, string) {
	if node, ok := kfdNode(root, slot); ok {
		if node["simd_count"] > 0 && node["local_mem_size"] == 0 {
			return true, "KFD topology: GPU node without local memory"
		}
		return false, ""
	}
	if vram > 0 && gtt >= 8*vram {
		return true, "GTT >= 8x VRAM; no KFD topology to confirm"
	}
	return false, ""
}

// kfdNode finds the KFD topology node of the GPU at a PCI address: its
// properties' location_id is bus<<8 | device<<3 | function, within domain.
func kfdNode(root fs.FS, slot string) (map[string]int64, bool) {
	var dom, bus, dev, fn uint64
	if _, err := fmt.Sscanf(slot, "%x:%x:%x.%x", &dom, &bus, &dev, &fn); err != nil {
		return nil, false
	}
	want := int64(bus<<8 | dev<<3 | fn)
	const nodes = "sys/class/kfd/kfd/topology/nodes"
	entries, err := fs.ReadDir(root, nodes)
	if err != nil {
		return nil, false
	}
	for _, e := range entries {
		data, err := fs.ReadFile(root, path.Join(nodes, e.Name(), "properties"))
		if err != nil {
			continue
		}
		props := map[string]int64{}
		for line := range strings.Lines(string(data)) {
			f := strings.Fields(line)
			if len(f) == 2 {
				if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					props[f[0]] = v
				}
			}
		}
		if loc, ok := props["location_id"]; ok && loc == want && props["domain"] == int64(dom) && props["simd_count"] > 0 {
			return props, true
		}
	}
	return nil, false
}

// probeIntel reads a discrete Arc card's VRAM (xe: tileN/physical_vram_size_bytes,
// summed; i915: lmem_total_bytes). An Intel GPU at 00:02.0 without local
// memory is the integrated one, which draws from system RAM.
func probeIntel(root fs.FS, card, slot string, uevent map[string]string) *gpu {
	name := "Intel GPU " + strings.ToLower(uevent["PCI_ID"])
	g := &gpu{vendor: "intel", name: name, busID: slot}
	var total int64
	tiles, _ := fs.Glob(root, card+"/device/tile*/physical_vram_size_bytes")
	for _, t := range tiles {
		if v, ok := readInt(root, t); ok {
			total += v
		}
	}
	if total > 0 {
		g.total, g.source = total, "xe sysfs tile*/physical_vram_size_bytes"
		return g
	}
	if v, ok := readInt(root, card+"/lmem_total_bytes"); ok && v > 0 {
		g.total, g.source = v, "i915 sysfs lmem_total_bytes"
		return g
	}
	if strings.HasSuffix(slot, ":00:02.0") {
		g.name = "Intel integrated GPU " + strings.ToLower(uevent["PCI_ID"])
		g.unified = true
		g.source = "Intel GPU at 00:02.0 without local memory: integrated, shares system RAM (its driver sets the share)"
		return g
	}
	return nil
}

// readUevent parses a sysfs uevent file (KEY=value lines).
func readUevent(root fs.FS, name string) map[string]string {
	out := map[string]string{}
	data, err := fs.ReadFile(root, name)
	if err != nil {
		return out
	}
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			out[k] = v
		}
	}
	return out
}
