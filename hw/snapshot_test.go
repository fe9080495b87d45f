package hw

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustPreset(t *testing.T, name string) *Snapshot {
	t.Helper()
	s, err := LoadMachine(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDomainOf(t *testing.T) {
	mac := mustPreset(t, "m4-max-128")
	box := mustPreset(t, "2x-rtx-3090")
	tests := []struct {
		snap   *Snapshot
		name   string
		device string // the view it resolves to
		domain string
		err    string
	}{
		{mac, "CPU", "CPU", "unified", ""},
		{mac, "MTL0", "MTL0", "unified", ""},
		{mac, "MTL0_Mapped", "MTL0", "unified", ""},
		{mac, "CPU_Mapped", "CPU", "unified", ""},
		{box, "CPU", "CPU", "ram", ""},
		{box, "CPU_REPACK", "CPU", "ram", ""},
		{box, "CUDA0", "CUDA0", "gpu0", ""},
		{box, "CUDA1", "CUDA1", "gpu1", ""},
		{box, "Vulkan1", "Vulkan1", "gpu1", ""},
		{box, "CUDA_Host", "CPU", "ram", ""}, // pinned host memory is system RAM
		{box, "Vulkan_Host", "CPU", "ram", ""},
		{box, "Host", "CPU", "ram", ""},
		{box, "CUDA2", "", "", `"CUDA2" is neither a device view nor a buffer type of this machine (devices: CPU, CUDA0, CUDA1, Vulkan0, Vulkan1)`},
		{mac, "CUDA_Host", "", "", "neither a device view nor a buffer type"},
	}
	for _, tc := range tests {
		d, err := tc.snap.DomainOf(tc.name)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s on %s: error %v, want %q", tc.name, tc.snap.Preset, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s on %s: %v", tc.name, tc.snap.Preset, err)
			continue
		}
		v, _ := tc.snap.ResolveDevice(tc.name)
		if d.ID != tc.domain || v.Name != tc.device {
			t.Errorf("%s on %s: view %s in %s, want %s in %s", tc.name, tc.snap.Preset, v.Name, d.ID, tc.device, tc.domain)
		}
	}
}

func TestValidate(t *testing.T) {
	good := func() *Snapshot { return mustPreset(t, "rtx-4090") }
	tests := []struct {
		name  string
		edit  func(s *Snapshot)
		wants []string
	}{
		{"unknown domain", func(s *Snapshot) { s.Devices[1].Domain = "gpu9" },
			[]string{`devices[1] (CUDA0): domain "gpu9" is not one of the domains (ram, gpu0)`}},
		{"negative size", func(s *Snapshot) { s.Domains[1].Capacity = -1 },
			[]string{"domains[1] (gpu0): capacity_bytes is -1, expected a positive size"}},
		{"negative free", func(s *Snapshot) { s.Domains[0].Free = ptr(int64(-5)) },
			[]string{"domains[0] (ram): free_bytes is -5"}},
		{"duplicate names", func(s *Snapshot) { s.Devices[2].Name = "CUDA0"; s.Domains[1].ID = "ram" },
			[]string{`devices[2] (CUDA0): name "CUDA0" is used by an earlier device`, `domains[1] (ram): id "ram" is used by an earlier domain`}},
		{"usable above capacity", func(s *Snapshot) { s.Domains[1].Usable = 25 << 30 },
			[]string{"usable_bytes is 26843545600, expected between 0 (all of it) and capacity_bytes 25769803776"}},
		{"bad kind and type", func(s *Snapshot) { s.Domains[0].Kind = "vram"; s.Devices[1].Type = "npu" },
			[]string{`kind is "vram", expected system, device or unified`, `type is "npu", expected cpu, gpu or igpu`}},
		{"no CPU", func(s *Snapshot) { s.Devices = s.Devices[1:] },
			[]string{"0 CPU views, expected exactly one"}},
		{"CPU on VRAM", func(s *Snapshot) { s.Devices[0].Domain = "gpu0" },
			[]string{"a CPU view is bound to gpu0, a device domain"}},
		{"schema", func(s *Snapshot) { s.Schema = 7 }, []string{"schema is 7, expected 1"}},
		{"alignment not a power of two", func(s *Snapshot) { s.Devices[1].Alignment = 48; s.Devices[1].HostAlignment = -64 },
			[]string{"devices[1] (CUDA0): an alignment is 48 bytes", "devices[1] (CUDA0): an alignment is -64 bytes"}},
	}
	if err := good().Validate(); err != nil {
		t.Fatalf("preset does not validate: %v", err)
	}
	for _, tc := range tests {
		s := good()
		tc.edit(s)
		err := s.Validate()
		for _, want := range tc.wants {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %v, want it to say %q", tc.name, err, want)
			}
		}
	}
}

func TestLoadMachine(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	if err := mustPreset(t, "DGX-Spark").WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(dir, "spark.json")
	os.WriteFile(saved, buf.Bytes(), 0o644)
	s, err := LoadMachine(saved)
	if err != nil {
		t.Fatal(err)
	}
	if s.Source != SourceFile || s.Preset != "dgx-spark" || len(s.Domains) != 1 || s.Domains[0].Capacity != 127600748<<10 {
		t.Errorf("round trip through a file: %+v", s)
	}
	if last := s.Notes[len(s.Notes)-1]; !strings.Contains(last, "loaded from "+saved+", saved from preset dgx-spark") {
		t.Errorf("file note: %q", last)
	}

	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	tests := []struct{ ref, err string }{
		{"rtx-9090", `"rtx-9090" is neither a preset`},
		{filepath.Join(dir, "missing.json"), "reading machine file"},
		{write("typo.json", `{"schema": 1, "source": "file", "domains": [], "devices": [], "note": []}`), `unknown field "note"`},
		{write("syntax.json", "{\n\"schema\": 1,\n}"), "line 3: expected a JSON snapshot"},
		{write("empty.json", `{"schema": 1, "source": "file", "domains": [], "devices": []}`), "domains: none given"},
	}
	for _, tc := range tests {
		if _, err := LoadMachine(tc.ref); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("LoadMachine(%s): error %v, want %q", filepath.Base(tc.ref), err, tc.err)
		}
	}
}
