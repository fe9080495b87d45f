package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/plan"
)

// Lines as llama-fit-params of the conformance engine printed them
// (TinyLlama Q4_K_M on the CPU build; the same model with 10 layers on
// Vulkan over llvmpipe).
const (
	cpuBreakdown = `0.00.235.420 I common_memory_breakdown_print: | memory breakdown [MiB] | total   free    self   model   context   compute    unaccounted |
0.00.237.222 I common_memory_breakdown_print: |   - Host               |                  339 =   181 +      88 +      70                |
0.00.237.238 I common_memory_breakdown_print: |   - CPU_REPACK         |                  455 =   455 +       0 +       0                |
0.00.245.528 I common_params_fit_impl: projected to use 339 MiB of host memory vs. 24151 MiB of total host memory`
	vulkanBreakdown = `0.00.740.882 I common_memory_breakdown_print: | memory breakdown [MiB]                         | total   free    self   model   context   compute    unaccounted |
0.00.740.930 I common_memory_breakdown_print: |   - Vulkan0 (llvmpipe (LLVM 15.0.6, 256 bits)) |  2048 = 2048 + ( 381 =   278 +      36 +      66) +        -381 |
0.00.740.931 I common_memory_breakdown_print: |   - Host                                       |                  421 =   357 +      52 +      12                |`
)

func TestParseBreakdown(t *testing.T) {
	for _, tt := range []struct {
		name  string
		lines string
		want  []BreakdownRow
	}{
		{"cpu", cpuBreakdown, []BreakdownRow{
			{Name: "Host", Self: 339, Model: 181, Context: 88, Compute: 70},
			{Name: "CPU_REPACK", Self: 455, Model: 455}}},
		{"vulkan", vulkanBreakdown, []BreakdownRow{
			{Name: "Vulkan0", Device: true, Self: 381, Model: 278, Context: 36, Compute: 66},
			{Name: "Host", Self: 421, Model: 357, Context: 52, Compute: 12}}},
		{"no breakdown", "load_tensors: CPU model buffer size = 0.00 MiB", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseBreakdown(strings.Split(tt.lines, "\n"))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("row %d: %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
	if _, err := ParseBreakdown([]string{"common_memory_breakdown_print: |   - Host | three = 1 + 2 |"}); err == nil {
		t.Error("an unreadable row was not an error")
	}
}

func FuzzParseBreakdown(f *testing.F) {
	for _, s := range []string{cpuBreakdown, vulkanBreakdown, "common_memory_breakdown_print: |   - X | 1 = 1 + 0 + 0 |"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rows, err := ParseBreakdown(strings.Split(s, "\n"))
		if err == nil {
			for _, r := range rows {
				if r.Name == "" {
					t.Fatalf("a row without a name from %q", s)
				}
			}
		}
	})
}

// Compare holds model and context to the printed rounding and compute to
// the accounting bounds, and a row only one side has disagrees.
func TestCompare(t *testing.T) {
	rows, err := ParseBreakdown(strings.Split(cpuBreakdown, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	planned := []plan.Buffer{
		{Device: "CPU", BufferType: "CPU_Mapped", Kind: plan.KindModel, Bytes: 636 * mib, Resident: 181*mib + mib/2},
		{Device: "CPU", BufferType: "CPU_REPACK", Kind: plan.KindModel, Bytes: 455 * mib},
		{Device: "CPU", BufferType: "CPU", Kind: plan.KindKV, Bytes: 88 * mib},
		{Device: "CPU", BufferType: "CPU", Kind: plan.KindOutput, Bytes: mib / 8},
		{Device: "CPU", BufferType: "CPU", Kind: plan.KindCompute, Bytes: 70*mib + mib/2},
	}
	if c := Compare("x", rows, planned, "CPU"); !c.Agrees {
		t.Errorf("the same load disagrees: %+v", c.Cells)
	}
	planned[2].Bytes = 96 * mib // 8 MiB more KV
	c := Compare("x", rows, planned, "CPU")
	if c.Agrees {
		t.Fatal("8 MiB more KV agrees")
	}
	for _, cell := range c.Cells {
		if want := cell.Row == "Host" && cell.Part == "context"; cell.Agrees == want {
			t.Errorf("%+v", cell)
		}
	}
	planned[2].Bytes = 88 * mib
	planned = append(planned, plan.Buffer{Device: "Vulkan0", BufferType: "Vulkan0", Kind: plan.KindModel, Bytes: 10 * mib})
	if c := Compare("x", rows, planned, "CPU"); c.Agrees {
		t.Error("a device only headroom has agrees")
	}
}

// llama-fit-params is the one beside the llama-server given, or beside
// the one on PATH, before any other on PATH.
func TestFindFitParams(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"llama-server", "llama-fit-params"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	want := filepath.Join(dir, "llama-fit-params")
	onPath := func(name string) (string, error) {
		if name == "llama-server" {
			return filepath.Join(dir, "llama-server"), nil
		}
		return "/elsewhere/" + name, nil
	}
	for _, server := range []string{filepath.Join(dir, "llama-server"), ""} {
		if got, err := FindFitParams(server, onPath); err != nil || got != want {
			t.Errorf("beside %q: %q %v, want %q", server, got, err, want)
		}
	}
	none := func(string) (string, error) { return "", errors.New("not found") }
	if _, err := FindFitParams("", none); !errors.Is(err, ErrNotFound) {
		t.Errorf("nothing installed: %v", err)
	}
}
