package conformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/cli"
	"github.com/headroom-llm/headroom/conformance"
	"github.com/headroom-llm/headroom/hw"
	"github.com/headroom-llm/headroom/plan"
)

// libraryFitSkips are library goldens that cannot be said as a fit
// command line, each with why. None today: every profile node-llama-cpp
// was given is one of fit's flags.
var libraryFitSkips = map[string]string{}

// TestFitProgramLibrary holds 'headroom fit --program library' to the
// library goldens: for each case, the command line built from its
// profile (the synth file it was measured on, its -c, -np, -b, -ub, -fa,
// -ctk, -ctv, -ngl, --no-mmap and --swa-full, and a machine file of its
// devices) must print every buffer group as the plan package's replay of
// the case gives it (TestAccuracy), and so equal to llama.cpp's printed
// figure wherever that replay is. Nothing tells fit the output rows: the
// program's own rule (n_batch) must give them. All 188 cases run in
// about 26 s on two cores.
func TestFitProgramLibrary(t *testing.T) {
	cases, err := conformance.Load(filepath.Join("testdata", "golden"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	machines := map[string]string{}
	models := map[string]string{}
	ran := 0
	for i := range cases {
		c := &cases[i]
		if why, ok := libraryFitSkips[c.ID]; ok {
			t.Logf("%s: not run: %s", c.ID, why)
			continue
		}
		model, err := sparseModel(dir, c, models)
		if err != nil {
			t.Fatal(err)
		}
		machine, err := caseMachine(dir, c, machines)
		if err != nil {
			t.Fatal(err)
		}
		args := libraryFitArgs(c, model, machine)
		var stdout, stderr bytes.Buffer
		code := cli.Main(context.Background(), args, cli.Env{Stdout: &stdout, Stderr: &stderr})
		if code != 0 && code != 1 {
			t.Errorf("%s: headroom %s: exit %d: %s", c.ID, strings.Join(args, " "), code, stderr.String())
			continue
		}
		var got struct {
			Program string        `json:"program"`
			Buffers []plan.Buffer `json:"buffers"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
			t.Errorf("%s: %v: %s", c.ID, err, stderr.String())
			continue
		}
		if got.Program != string(plan.ProgramLibrary) {
			t.Errorf("%s: program %q, want library", c.ID, got.Program)
		}
		replay, err := predict(c)
		if err != nil {
			t.Errorf("%s: replay: %v", c.ID, err)
			continue
		}
		fromCLI := compare(c, &plan.Result{Buffers: got.Buffers})
		for j, want := range compare(c, replay) {
			have := fromCLI[j]
			if have.buft != want.buft || have.kind != want.kind || have.ours != want.ours {
				t.Errorf("%s: %s %s: fit --program library %d bytes, the replay %d (%s)",
					c.ID, want.buft, want.kind, have.ours, want.ours, strings.Join(args, " "))
				continue
			}
			if want.ok() && !have.ok() {
				t.Errorf("%s: %s %s: %.2f MiB, llama.cpp %.2f MiB", c.ID, want.buft, want.kind, float64(have.ours)/(1<<20), want.engine)
			}
		}
		ran++
	}
	t.Logf("%d library goldens held through fit --program library", ran)
}

// libraryFitArgs is the fit command line for a library golden: what the
// harness asked node-llama-cpp for, with the batch sizes llama.cpp printed
// (node-llama-cpp gives n_ubatch = n_batch, one more for SWA models).
func libraryFitArgs(c *conformance.Case, model, machine string) []string {
	pr := c.Inputs.Profile
	ctx := c.Figures.Context
	fa := map[conformance.FlashAttention]string{conformance.FlashOn: "on", conformance.FlashOff: "off", conformance.FlashAuto: "auto"}[pr.FlashAttention]
	ngl := "0"
	switch {
	case pr.Backend == "cpu":
	case pr.GPULayers >= 999:
		ngl = "all"
	default:
		ngl = strconv.Itoa(pr.GPULayers)
	}
	args := []string{"fit", model, "--program", "library", "--machine", machine, "--json", "--quiet",
		"--engine", c.Engine.LlamaCppSourceCommit,
		"-c", strconv.Itoa(pr.NCtx()), "-np", strconv.Itoa(pr.Sequences),
		"-b", strconv.Itoa(ctx.NBatch), "-ub", strconv.Itoa(ctx.NUbatch), "-fa", fa,
		"-ctk", pr.CacheTypeK, "-ctv", pr.CacheTypeV, "-ngl", ngl,
		"--swa-full=" + strconv.FormatBool(pr.SWAFull)}
	if !pr.MMap {
		args = append(args, "--no-mmap")
	}
	return args
}

// sparseModel writes the synth file a case was measured on once per
// shape and quant: its header, then a hole to the file's full size.
func sparseModel(dir string, c *conformance.Case, done map[string]string) (string, error) {
	key := c.Inputs.Shape + "." + c.Inputs.Quant
	if p, ok := done[key]; ok {
		return p, nil
	}
	if err := c.CheckSynth(); err != nil {
		return "", err
	}
	b, err := c.Synth()
	if err != nil {
		return "", err
	}
	layout, err := b.Layout()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, key+".gguf")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := b.WriteHeader(f); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Truncate(layout.Size); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	done[key] = path
	return path, nil
}

// caseMachine writes a machine file of the devices a case ran on, as
// predict gives them to the accountant: the CPU with the instruction sets
// its system_info names and, for a Vulkan case, llvmpipe with its limits.
// System memory is ample, so that the verdict asks for no fixes.
func caseMachine(dir string, c *conformance.Case, done map[string]string) (string, error) {
	var features []string
	for _, feat := range []string{"AVX2", "AVX512"} {
		if strings.Contains(c.Engine.SystemInfo, feat+" = 1") {
			features = append(features, strings.ToLower(feat))
		}
	}
	backend := c.Inputs.Profile.Backend
	key := backend + "." + strings.Join(features, "-")
	if p, ok := done[key]; ok {
		return p, nil
	}
	s := hw.Snapshot{Schema: 1, Source: "file",
		Domains: []hw.Domain{{ID: "ram", Kind: hw.KindSystem, Capacity: 1 << 40}},
		Devices: []hw.Device{{Name: "CPU", Backend: "CPU", Type: hw.TypeCPU, Domain: "ram", Features: features}}}
	switch backend {
	case "cpu":
	case "vulkan":
		free := int64(llvmpipeBytes)
		s.Domains = append(s.Domains, hw.Domain{ID: "llvmpipe", Kind: hw.KindDevice, Capacity: llvmpipeBytes})
		s.Devices = append(s.Devices, hw.Device{Name: "Vulkan0", Backend: "Vulkan", Type: hw.TypeGPU, Domain: "llvmpipe",
			Total: llvmpipeBytes, Free: &free, MaxAlloc: llvmpipeMaxAlloc, Alignment: llvmpipeAlign,
			HostAlignment: llvmpipeHostAlign, HostBuffer: "Vulkan_Host"})
	default:
		return "", fmt.Errorf("%s: no machine file for backend %q", c.ID, backend)
	}
	data, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "machine."+key+".json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", err
	}
	done[key] = path
	return path, nil
}
