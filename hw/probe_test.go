package hw

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata")

// fakeRunner answers from a recorded cmd/ directory (see testdata/README.md).
type fakeRunner struct{ dir string }

func commandKey(name string, args []string) string {
	parts := []string{path.Base(filepath.ToSlash(name))}
	for _, a := range args {
		a = strings.TrimLeft(a, "-")
		a, _, _ = strings.Cut(a, "=")
		parts = append(parts, a)
	}
	return strings.Join(parts, "_")
}

func (f fakeRunner) LookPath(file string) (string, error) {
	matches, _ := filepath.Glob(filepath.Join(f.dir, file+"[._]*"))
	if len(matches) == 0 {
		return "", fmt.Errorf("exec: %q: executable file not found in $PATH", file)
	}
	return "/usr/local/bin/" + file, nil
}

type fakeExit int

func (e fakeExit) Error() string { return "exit status " + strconv.Itoa(int(e)) }

func (f fakeRunner) Output(ctx context.Context, name string, args ...string) ([]byte, []byte, error) {
	if _, err := f.LookPath(path.Base(name)); err != nil {
		return nil, nil, err
	}
	key := filepath.Join(f.dir, commandKey(name, args))
	stdout, errOut := os.ReadFile(key + ".out")
	stderr, errErr := os.ReadFile(key + ".err")
	if errOut != nil && errErr != nil {
		return nil, nil, fmt.Errorf("fake: no recorded output for %s %v (%s.out)", name, args, key)
	}
	if b, err := os.ReadFile(key + ".exit"); err == nil {
		code, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return stdout, stderr, fakeExit(code)
	}
	return stdout, stderr, nil
}

// TestProbeMachines probes each recorded machine and compares the snapshot
// with its golden want.json.
func TestProbeMachines(t *testing.T) {
	tests := []struct {
		machine string
		goos    string
		check   func(t *testing.T, s *Snapshot)
	}{
		{"cpu-cgroup2", "linux", func(t *testing.T, s *Snapshot) {
			ram := s.Domain("ram")
			if ram.Usable != 16<<30 || *ram.Free != 14<<30 {
				t.Errorf("cgroup v2 limit: usable %d, free %d; want 16 GiB usable, 14 GiB free (limit - current)", ram.Usable, *ram.Free)
			}
		}},
		{"cpu-llvmpipe", "linux", func(t *testing.T, s *Snapshot) {
			// Captured from the conformance engine's Vulkan build on Mesa's
			// software device: its fixed limits come with it.
			d := s.Device("Vulkan0")
			if d == nil || d.MaxAlloc != 128<<20 || d.Alignment != 16 || d.HostAlignment != 64 {
				t.Errorf("llvmpipe's limits: %+v", d)
			}
		}},
		{"cpu-cgroup1", "linux", func(t *testing.T, s *Snapshot) {
			if ram := s.Domain("ram"); ram.Usable != 8<<30 {
				t.Errorf("cgroup v1 parent limit: usable %d, want 8 GiB", ram.Usable)
			}
		}},
		{"rtx4090-desktop", "linux", func(t *testing.T, s *Snapshot) {
			if g := s.Domain("gpu0"); g == nil || g.Reserved != (1204+318+893)<<20 {
				t.Errorf("desktop reserve: %+v", g)
			}
			for _, name := range []string{"CUDA0", "Vulkan0"} {
				if d, _ := s.DomainOf(name); d == nil || d.ID != "gpu0" {
					t.Errorf("%s should draw from gpu0", name)
				}
			}
		}},
		{"2x3090-llama", "linux", func(t *testing.T, s *Snapshot) {
			if s.Device("CUDA1").PhysicalID != s.Device("Vulkan1").PhysicalID || s.Device("CUDA1").Domain != "gpu1" {
				t.Errorf("CUDA1 and Vulkan1 should be views of one card in gpu1")
			}
		}},
		{"dgx-spark", "linux", func(t *testing.T, s *Snapshot) {
			if len(s.Domains) != 1 || s.Domains[0].Kind != KindUnified || s.Device("CUDA0").Domain != "unified" {
				t.Errorf("GB10 should be one unified pool: %+v", s.Domains)
			}
		}},
		{"strix-halo", "linux", func(t *testing.T, s *Snapshot) {
			u := s.Domain("unified")
			if u == nil || u.Usable != 512<<20+96<<30 || u.BandwidthGBps != 256 {
				t.Errorf("Strix Halo pool: %+v", u)
			}
		}},
		{"amd-dgpu", "linux", func(t *testing.T, s *Snapshot) {
			if s.Domain("gpu0") == nil || s.Device("ROCm0") == nil {
				t.Errorf("discrete AMD card should be gpu0 with ROCm0")
			}
		}},
		{"amd-apu-nokfd", "linux", nil},
		{"intel-arc-igpu", "linux", func(t *testing.T, s *Snapshot) {
			if s.Domain("unified") == nil || s.Domain("gpu0") == nil || s.Domain("gpu0").Capacity != 12<<30 {
				t.Errorf("Intel: want a unified pool (iGPU) and a 12 GiB gpu0: %+v", s.Domains)
			}
		}},
		{"mac-m4-max-128", "darwin", func(t *testing.T, s *Snapshot) {
			if u := s.Domain("unified"); u.Usable != 110100<<20 {
				t.Errorf("Metal working set should be read live: usable %d", u.Usable)
			}
		}},
		{"mac-m3-pro-18", "darwin", func(t *testing.T, s *Snapshot) {
			// llama.cpp's fit logged 12287 MiB free on an idle 18 GB M3
			// Pro: the default 2/3 working set of 12288 MiB.
			u := s.Domain("unified")
			if u.Usable != 12288<<20 || u.BandwidthGBps != 150 || len(s.Views("unified")) != 2 {
				t.Errorf("usable %d, bandwidth %g, views %v", u.Usable, u.BandwidthGBps, s.Views("unified"))
			}
		}},
		{"mac-m2-16-wired", "darwin", func(t *testing.T, s *Snapshot) {
			if u := s.Domain("unified"); u.Usable != 12<<30 || u.BandwidthGBps != 100 {
				t.Errorf("iogpu.wired_limit_mb: usable %d, bandwidth %g", u.Usable, u.BandwidthGBps)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.machine, func(t *testing.T) {
			dir := filepath.Join("testdata", "probe", tc.machine)
			root := fs.FS(os.DirFS(filepath.Join(dir, "root")))
			s, err := Probe(context.Background(), ProbeOptions{
				Root:   root,
				Runner: fakeRunner{filepath.Join(dir, "cmd")},
				GOOS:   tc.goos,
				Host:   tc.machine,
				Now:    time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
			})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := s.WriteJSON(&buf); err != nil {
				t.Fatal(err)
			}
			got := buf.Bytes()
			golden := filepath.Join(dir, "want.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("snapshot differs from %s (run with -update and read the diff):\n%s", golden, got)
			}
			// What 'headroom hw --json' prints must load back as a machine file.
			back, err := DecodeMachine(got)
			var again bytes.Buffer
			if err != nil {
				t.Errorf("the snapshot does not load back: %v", err)
			} else if back.WriteJSON(&again); !bytes.Equal(again.Bytes(), got) {
				t.Errorf("the snapshot changes on a round trip")
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

func TestProbeFailures(t *testing.T) {
	noRun := fakeRunner{t.TempDir()}
	tests := []struct {
		name string
		opts ProbeOptions
		err  string
	}{
		{"no meminfo", ProbeOptions{Root: os.DirFS(t.TempDir()), GOOS: "linux"}, "reading system memory"},
		{"windows", ProbeOptions{Root: os.DirFS(t.TempDir()), GOOS: "windows"}, "probing windows is not implemented"},
		{"mac without sysctl", ProbeOptions{GOOS: "darwin"}, "sysctl -n hw.memsize"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Runner, tc.opts.LlamaServer = noRun, "-"
			_, err := Probe(context.Background(), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want it to mention %q", err, tc.err)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Probe(ctx, ProbeOptions{Root: os.DirFS("testdata/probe/cpu-cgroup2/root"), Runner: noRun, GOOS: "linux"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled probe: %v", err)
	}
}

func TestParseListDevices(t *testing.T) {
	tests := []struct {
		name, out string
		want      []nativeDevice
		err       string
	}{
		{"none", "Available devices:\n  (none)\n", nil, ""},
		{"noise before the header", "ggml_vulkan: Found 1 Vulkan devices:\nAvailable devices:\n  Vulkan0: Intel(R) Arc(TM) A770 Graphics (DG2) (16032 MiB, 15800 MiB free)\n",
			[]nativeDevice{{"Vulkan0", "Intel(R) Arc(TM) A770 Graphics (DG2)", 16032 << 20, 15800 << 20}}, ""},
		{"older Metal name, RPC skipped", "Available devices:\n  Metal: Apple M1 Max (26000 MiB, 25999 MiB free)\n  RPC[10.0.0.2:50052]: RPC (8000 MiB, 8000 MiB free)\n",
			[]nativeDevice{{"Metal", "Apple M1 Max", 26000 << 20, 25999 << 20}}, ""},
		{"not llama.cpp", "usage: llama-server [options]\n", nil, "Available devices"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			list, err := parseListDevices([]byte(tc.out))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(list.devices) != fmt.Sprint(tc.want) {
				t.Errorf("got %+v, want %+v", list.devices, tc.want)
			}
		})
	}
}

func TestParseNVIDIA(t *testing.T) {
	if _, err := parseNVIDIAQuery([]byte("0, NVIDIA GeForce RTX 4090, 24564\n")); err == nil || !strings.Contains(err.Error(), "expected 6") {
		t.Errorf("short line: %v", err)
	}
	for in, want := range map[string]string{
		"00000000:01:00.0": "0000:01:00.0",
		"0000000F:01:00.0": "000f:01:00.0",
		"0000:4B:00.0":     "0000:4b:00.0",
		"[N/A]":            "",
	} {
		if got := normalizeBusID(in); got != want {
			t.Errorf("normalizeBusID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseMac(t *testing.T) {
	if got := parseSwapUsage("total = 2048.00M  used = 1093.25M  free = 954.75M  (encrypted)"); got != 2<<30 {
		t.Errorf("swap %d", got)
	}
	if _, ok := parseVMStat("Pages free: 12.\n"); ok {
		t.Errorf("vm_stat without a page size should not be read")
	}
}

// A measured bandwidth fills only domains no specification covered, and
// says where it came from.
func TestProbeMeasuresUnknownBandwidth(t *testing.T) {
	dir := filepath.Join("testdata", "probe", "cpu-cgroup2")
	calls := 0
	s, err := Probe(context.Background(), ProbeOptions{
		Root: os.DirFS(filepath.Join(dir, "root")), Runner: fakeRunner{filepath.Join(dir, "cmd")}, GOOS: "linux", Host: "t",
		MeasureBandwidth: func(context.Context) (float64, string, error) {
			calls++
			return 41.27, "measured here: test", nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	d := s.Domain("ram")
	if calls != 1 || d.BandwidthGBps != 41.2 || d.BandwidthSource != "measured here: test" {
		t.Errorf("calls %d, bandwidth %g from %q", calls, d.BandwidthGBps, d.BandwidthSource)
	}
}

func TestMeasureBandwidth(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 256 MiB")
	}
	gbps, how, err := MeasureBandwidth(context.Background())
	if err != nil || gbps <= 0.1 || !strings.Contains(how, "measured here") {
		t.Errorf("%g GB/s, %q, %v", gbps, how, err)
	}
}
