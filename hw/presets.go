package hw

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// presetsJSON holds the presets and the bandwidth table, each figure with
// its source, in a file people can read and review.
//
//go:embed presets.json
var presetsJSON []byte

type presetFile struct {
	About      []string         `json:"about"`
	Presets    []presetMachine  `json:"presets"`
	Bandwidths []bandwidthEntry `json:"bandwidths"`
}

type presetMachine struct {
	Name    string         `json:"name"`
	Summary string         `json:"summary"`
	Domains []presetDomain `json:"domains"`
	Devices []presetDevice `json:"devices"`
	Notes   []string       `json:"notes"`
}

type presetDomain struct {
	ID              string  `json:"id"`
	Kind            string  `json:"kind"`
	Description     string  `json:"description"`
	Capacity        string  `json:"capacity"`
	CapacitySource  string  `json:"capacity_source"`
	Usable          string  `json:"usable"`
	UsableSource    string  `json:"usable_source"`
	BandwidthGBps   float64 `json:"bandwidth_gbps"`
	BandwidthSource string  `json:"bandwidth_source"`
}

type presetDevice struct {
	Name        string `json:"name"`
	Domain      string `json:"domain"`
	Description string `json:"description"`
	PhysicalID  string `json:"physical_id"`
	Total       string `json:"total"`
	TotalSource string `json:"total_source"`
	// Features are the CPU's instruction sets that decide weight repacking.
	Features       []string `json:"features"`
	FeaturesSource string   `json:"features_source"`
}

// bandwidthEntry is a known device's memory bandwidth. Name matches a device
// name exactly or as its last words ("RTX 4090" matches "NVIDIA GeForce RTX
// 4090" but not "... RTX 4090 D"); MinMemory, when set, tells apart parts
// sold under one name with different memory buses.
type bandwidthEntry struct {
	Name      string  `json:"name"`
	GBps      float64 `json:"gbps"`
	MinMemory string  `json:"min_memory"`
	Source    string  `json:"source"`
}

// PresetInfo is one line of the preset list.
type PresetInfo struct {
	Name    string `json:"name"`
	Summary string `json:"summary"`
}

func loadPresetFile() (*presetFile, error) {
	dec := json.NewDecoder(bytes.NewReader(presetsJSON))
	dec.DisallowUnknownFields()
	var f presetFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("hw: built-in presets.json: %w", err)
	}
	return &f, nil
}

// Presets lists the built-in machines, in the order of presets.json.
func Presets() []PresetInfo {
	f, err := loadPresetFile()
	if err != nil {
		return nil // the tests keep the embedded file valid
	}
	out := make([]PresetInfo, len(f.Presets))
	for i, p := range f.Presets {
		out[i] = PresetInfo{Name: p.Name, Summary: p.Summary}
	}
	return out
}

// presetByName builds the named preset, or returns nil, nil when no preset
// has that name.
func presetByName(name string) (*Snapshot, error) {
	f, err := loadPresetFile()
	if err != nil {
		return nil, err
	}
	for _, p := range f.Presets {
		if strings.EqualFold(p.Name, strings.TrimSpace(name)) {
			return p.snapshot()
		}
	}
	return nil, nil
}

func (p presetMachine) snapshot() (*Snapshot, error) {
	s := &Snapshot{Schema: Schema, Source: SourcePreset, Preset: p.Name,
		Notes: append([]string{"preset " + p.Name + ": " + p.Summary}, p.Notes...)}
	for _, pd := range p.Domains {
		capacity, err := parseSize(pd.Capacity, 0)
		if err != nil {
			return nil, fmt.Errorf("hw: preset %s, domain %s: capacity: %w", p.Name, pd.ID, err)
		}
		d := Domain{ID: pd.ID, Kind: pd.Kind, Description: pd.Description, Capacity: capacity,
			BandwidthGBps: pd.BandwidthGBps, Source: pd.CapacitySource, BandwidthSource: pd.BandwidthSource}
		if pd.Usable != "" {
			if d.Usable, err = parseSize(pd.Usable, capacity); err != nil {
				return nil, fmt.Errorf("hw: preset %s, domain %s: usable: %w", p.Name, pd.ID, err)
			}
			d.Source += "; usable: " + pd.UsableSource
		}
		s.Domains = append(s.Domains, d)
	}
	for _, pv := range p.Devices {
		backend := backendOf(pv.Name)
		d := Device{Name: pv.Name, Backend: backend, Description: pv.Description, Domain: pv.Domain,
			PhysicalID: pv.PhysicalID, HostBuffer: hostBufferOf(backend), Type: TypeGPU, Source: "preset", Features: pv.Features}
		dom := s.Domain(pv.Domain)
		switch {
		case backend == "CPU":
			d.Type = TypeCPU
		case dom != nil && dom.Kind == KindUnified:
			d.Type = TypeIGPU
		}
		if pv.Total != "" {
			var base int64
			if dom != nil {
				base = dom.Capacity
			}
			total, err := parseSize(pv.Total, base)
			if err != nil {
				return nil, fmt.Errorf("hw: preset %s, device %s: total: %w", p.Name, pv.Name, err)
			}
			d.Total = total
			d.Source = "preset; total: " + pv.TotalSource
		}
		s.Devices = append(s.Devices, d)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("hw: preset %s: %w", p.Name, err)
	}
	return s, nil
}

// knownBandwidth looks a device name up in the bandwidth table. memory is
// the device's memory size, for entries that need it to tell parts apart.
func knownBandwidth(name string, memory int64) (gbps float64, source string) {
	f, err := loadPresetFile()
	if err != nil || name == "" {
		return 0, ""
	}
	name = strings.ToLower(strings.Join(strings.Fields(name), " "))
	// Vulkan drivers append their own tag: "AMD Radeon 8060S Graphics (RADV GFX1151)".
	bare := name
	if i := strings.LastIndex(name, " ("); i > 0 && strings.HasSuffix(name, ")") {
		bare = name[:i]
	}
	for _, e := range f.Bandwidths {
		pat := strings.ToLower(e.Name)
		if !nameEndsWith(name, pat) && !nameEndsWith(bare, pat) {
			continue
		}
		if e.MinMemory != "" {
			floor, err := parseSize(e.MinMemory, 0)
			if err != nil || memory < floor {
				continue
			}
		}
		return e.GBps, "known device " + e.Name + ": " + e.Source
	}
	return 0, ""
}

// nameEndsWith reports whether a device name is pattern or ends with it as
// whole words.
func nameEndsWith(name, pattern string) bool {
	return name == pattern || strings.HasSuffix(name, " "+pattern)
}

// parseSize reads "24 GiB", "127600748 KiB", "512 B", or, relative to base,
// a fraction "2/3" or a percentage "75%". Units are binary only: a decimal
// "GB" is refused because it is ambiguous in vendor material.
func parseSize(s string, base int64) (int64, error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || v <= 0 || v > 100 || base <= 0 {
			return 0, fmt.Errorf("size %q: expected a percentage of a known capacity, between 0 and 100", s)
		}
		return int64(math.Round(float64(base) * v / 100)), nil
	}
	if num, den, ok := strings.Cut(s, "/"); ok {
		n, err1 := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
		d, err2 := strconv.ParseInt(strings.TrimSpace(den), 10, 64)
		if err1 != nil || err2 != nil || n <= 0 || d <= 0 || n > d || base <= 0 {
			return 0, fmt.Errorf("size %q: expected a fraction n/d of a known capacity, with 0 < n <= d", s)
		}
		return base / d * n, nil
	}
	num, unit, _ := strings.Cut(s, " ")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("size %q: expected a number and a unit (B, KiB, MiB, GiB, TiB)", s)
	}
	mult := map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[strings.TrimSpace(unit)]
	if mult == 0 {
		return 0, fmt.Errorf("size %q: unit %q, expected B, KiB, MiB, GiB or TiB", s, unit)
	}
	return int64(math.Round(v * mult)), nil
}
