package hw

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/headroom-llm/headroom/internal/suggest"
	"os"
	"slices"
	"strings"
)

// Validate checks that a snapshot is one the planner can account against:
// the schema it knows, unique domain IDs and device names, known kinds and
// types, sizes that are not negative, a usable share within capacity, and
// every device bound to a domain that exists, with a CPU view bound to
// system or unified memory. All problems are reported together, each naming
// where it is, what was found and what was expected.
func (s *Snapshot) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s.Schema != Schema {
		bad("schema is %d, expected %d", s.Schema, Schema)
	}
	if len(s.Domains) == 0 {
		bad("domains: none given, expected at least the system or unified memory")
	}
	ids := map[string]bool{}
	for i, d := range s.Domains {
		at := fmt.Sprintf("domains[%d] (%s)", i, d.ID)
		switch {
		case d.ID == "":
			bad("domains[%d]: id is empty", i)
		case ids[d.ID]:
			bad("%s: id %q is used by an earlier domain", at, d.ID)
		}
		ids[d.ID] = true
		if d.Kind != KindSystem && d.Kind != KindDevice && d.Kind != KindUnified {
			bad("%s: kind is %q, expected %s, %s or %s", at, d.Kind, KindSystem, KindDevice, KindUnified)
		}
		if d.Capacity <= 0 {
			bad("%s: capacity_bytes is %d, expected a positive size", at, d.Capacity)
		}
		if d.Free != nil && *d.Free < 0 {
			bad("%s: free_bytes is %d, expected zero or more", at, *d.Free)
		}
		if d.Usable < 0 || d.Usable > d.Capacity {
			bad("%s: usable_bytes is %d, expected between 0 (all of it) and capacity_bytes %d", at, d.Usable, d.Capacity)
		}
		for _, f := range []struct {
			name string
			v    int64
		}{{"reserved_bytes", d.Reserved}, {"swap_bytes", d.Swap}} {
			if f.v < 0 {
				bad("%s: %s is %d, expected zero or more", at, f.name, f.v)
			}
		}
		if d.BandwidthGBps < 0 {
			bad("%s: bandwidth_gbps is %g, expected zero (unknown) or more", at, d.BandwidthGBps)
		}
	}
	known := make([]string, 0, len(s.Domains))
	for _, d := range s.Domains {
		known = append(known, d.ID)
	}
	names := map[string]bool{}
	cpus := 0
	for i, d := range s.Devices {
		at := fmt.Sprintf("devices[%d] (%s)", i, d.Name)
		switch {
		case d.Name == "":
			bad("devices[%d]: name is empty, expected llama.cpp's name (CPU, CUDA0, ...)", i)
		case names[d.Name]:
			bad("%s: name %q is used by an earlier device", at, d.Name)
		}
		names[d.Name] = true
		if d.Type != TypeCPU && d.Type != TypeGPU && d.Type != TypeIGPU {
			bad("%s: type is %q, expected %s, %s or %s", at, d.Type, TypeCPU, TypeGPU, TypeIGPU)
		}
		dom := s.Domain(d.Domain)
		if dom == nil {
			bad("%s: domain %q is not one of the domains (%s)", at, d.Domain, strings.Join(known, ", "))
		}
		if d.Type == TypeCPU {
			cpus++
			if dom != nil && dom.Kind == KindDevice {
				bad("%s: a CPU view is bound to %s, a %s domain; expected system or unified memory", at, dom.ID, dom.Kind)
			}
		}
		for _, a := range []int64{d.Alignment, d.HostAlignment} {
			if a < 0 || a&(a-1) != 0 {
				bad("%s: an alignment is %d bytes, expected zero (the backend's usual value) or a power of two", at, a)
			}
		}
		if d.Total < 0 || d.MaxAlloc < 0 || (d.Free != nil && *d.Free < 0) {
			bad("%s: a size is negative (total_bytes %d, max_alloc_bytes %d), expected zero (unknown) or more", at, d.Total, d.MaxAlloc)
		}
		if d.Backend == BackendRPC && !slices.Contains(s.RPC, d.Endpoint) {
			bad("%s: an RPC device of endpoint %q, which rpc does not list (%s)", at, d.Endpoint, strings.Join(s.RPC, ", "))
		}
		for j, p := range d.Processes {
			if p.Bytes < 0 {
				bad("%s: processes[%d] (%s) bytes is %d, expected zero or more", at, j, p.Name, p.Bytes)
			}
		}
	}
	if cpus != 1 {
		bad("devices: %d CPU views, expected exactly one (llama.cpp always has CPU)", cpus)
	}
	return errors.Join(errs...)
}

// LoadMachine returns the machine a plan is made for: a built-in preset by
// name (case-insensitive: rtx-4090, 2x-rtx-3090, m4-max-128, ...; see
// Presets), or a JSON file in the shape 'headroom hw --json' prints. A
// preset's name wins over a file of the same name; write ./name for the
// file.
func LoadMachine(ref string) (*Snapshot, error) {
	if p, err := presetByName(ref); err != nil || p != nil {
		return p, err
	}
	data, err := os.ReadFile(ref)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !strings.ContainsAny(ref, `/\.`) {
			var names []string
			for _, p := range Presets() {
				names = append(names, p.Name)
			}
			if s := suggest.Closest(ref, names); s != "" {
				return nil, fmt.Errorf("hw: %q is neither a preset nor a machine file (did you mean the preset %s? headroom hw --presets lists them): %w", ref, s, err)
			}
			return nil, fmt.Errorf("hw: %q is neither a preset (headroom hw --presets lists them) nor a machine file: %w", ref, err)
		}
		return nil, fmt.Errorf("hw: reading machine file: %w", err)
	}
	s, err := DecodeMachine(data)
	if err != nil {
		return nil, fmt.Errorf("hw: machine file %s: %w", ref, err)
	}
	s.Notes = append(s.Notes, "loaded from "+ref+origin(s))
	s.Source = SourceFile
	return s, nil
}

// origin says what a machine file was saved from, for the note LoadMachine
// adds.
func origin(s *Snapshot) string {
	switch s.Source {
	case SourcePreset:
		return ", saved from preset " + s.Preset
	case SourceProbe:
		out := ", saved from a probe"
		if s.Host != "" {
			out += " of " + s.Host
		}
		if !s.Taken.IsZero() {
			out += " taken " + s.Taken.Format("2006-01-02 15:04 MST")
		}
		return out
	}
	return ""
}

// DecodeMachine parses and validates a snapshot in its JSON form. Unknown
// fields are errors, so a misspelt key does not silently become a zero.
func DecodeMachine(data []byte) (*Snapshot, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Snapshot
	if err := dec.Decode(&s); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
			return nil, fmt.Errorf("line %d: expected a JSON snapshot: %w", line, err)
		}
		return nil, fmt.Errorf("expected a JSON snapshot: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}
