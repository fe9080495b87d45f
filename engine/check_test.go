package engine

import (
	"reflect"
	"slices"
	"testing"
)

// Beyond keeps only the figures where llama.cpp counts more, on the
// device each row belongs to.
func TestCheckBeyond(t *testing.T) {
	c := Check{Cells: []CheckCell{
		{Row: "Host", Part: "model", Engine: 5107, Headroom: 4562},
		{Row: "Host", Part: "context", Engine: 64, Headroom: 64, Agrees: true},
		{Row: "CPU_REPACK", Part: "model", Engine: 12, Headroom: 9},
		{Row: "Vulkan0", Part: "compute", Engine: 100, Headroom: 140},
		{Row: "Vulkan0", Part: "context", Engine: 80, Headroom: 64},
	}}
	got := c.Beyond("CPU")
	want := []Row{
		{BufferType: "CPU", Kind: "model", DiffBytes: 545 << 20, LoggedMiB: 5107},
		{BufferType: "CPU", Kind: "model", DiffBytes: 3 << 20, LoggedMiB: 12},
		{BufferType: "Vulkan0", Kind: "kv", DiffBytes: 16 << 20, LoggedMiB: 80},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

// llama-fit-params refuses the flags for what llama-server keeps past the
// load ("invalid argument: -cram"), and projects the same load without
// them: they are dropped with --fit.
func TestWithoutFitFlagsDropsServing(t *testing.T) {
	got := withoutFitFlags([]string{"-c", "8192", "--fit", "off", "-cram", "897", "-ctxcp", "4", "-cms", "0", "--no-cache-idle-slots", "-np", "2"})
	if want := []string{"-c", "8192", "-np", "2"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
