package plan

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/arch"
	"github.com/headroom-llm/headroom/builds"
)

// explainHeadless says what stopping the desktop session would buy.
func explainHeadless(c, h *Candidate, reserve int64) string {
	held := fmt.Sprintf("a desktop session holds %d MiB of GPU memory", reserve>>20)
	switch {
	case h == nil:
		return held + "; even without it nothing fits"
	case c == nil:
		return fmt.Sprintf("%s; running headless (--headless) would make it fit: %s", held, argsString(h.Flags))
	case h.GPULayers == c.GPULayers && h.CtxPerSlot == c.CtxPerSlot && h.Profile.CacheK == c.Profile.CacheK:
		return held + "; running headless would not change this plan"
	default:
		return fmt.Sprintf("%s; running headless (--headless) would allow %d cells per slot, -ngl %d (%s)",
			held, h.CtxPerSlot, h.GPULayers, argsString(h.Flags))
	}
}

// Args renders the profile as llama-server arguments, the model aside
// (llama-cli and llama-completion take the same), or as a library
// context's parameters.
// They always name the GPU layers (-ngl 0 too) and turn llama.cpp's own fit
// off (--fit off): llama-server's defaults are -ngl auto with --fit on,
// which would rewrite the placement the accounting was done for.
func (p Profile) Args() []string {
	if p.Program.OrServer() == ProgramLibrary {
		return p.libraryArgs()
	}
	f := append(ctxFlag(p.Ctx), "-np", strconv.Itoa(p.Parallel))
	f = append(f, nglFlag(p.GPULayers)...)
	f = append(f, "--fit", "off")
	// Batch sizes change the compute buffers; say them when they are not
	// llama-server's defaults.
	d := Defaults()
	if p.Batch != d.Batch {
		f = append(f, "-b", strconv.Itoa(p.Batch))
	}
	if p.UBatch != d.UBatch {
		f = append(f, "-ub", strconv.Itoa(p.UBatch))
	}
	// A quantized V cache needs flash attention; a quantized K alone does
	// not. A profile that fixed flash attention says so, since
	// llama-server's default (auto) may resolve otherwise.
	if p.CacheV != "f16" || p.FlashAttn == FlashOn {
		f = append(f, "-fa", "on")
	} else if p.FlashAttn == FlashOff {
		f = append(f, "-fa", "off")
	}
	if p.CacheK != "f16" {
		f = append(f, "-ctk", p.CacheK)
	}
	if p.CacheV != "f16" {
		f = append(f, "-ctv", p.CacheV)
	}
	if len(p.TensorSplit) > 0 {
		f = append(f, "-ts", splitString(p.TensorSplit))
	}
	if len(p.Overrides) > 0 {
		f = append(f, "-ot", overrideFlag(p.Overrides))
	}
	switch {
	case p.rules().MlockLoads && p.Mlock && p.Mmap:
		f = append(f, "--load-mode", "mmap+mlock")
	case p.rules().MlockLoads && p.Mlock:
		f = append(f, "--load-mode", "mlock")
	case !p.Mmap:
		f = append(f, noMmapFlag(p.rules())...)
	}
	if p.Mlock && !p.rules().MlockLoads {
		// Before PR #26135 --mlock locked the mapping, or with
		// --no-mmap the loaded buffers.
		f = append(f, "--mlock")
	}
	if p.KVUnified {
		f = append(f, "-kvu")
	}
	if p.SWAFull {
		f = append(f, "--swa-full")
	}
	if p.NoKVOffload {
		f = append(f, "-nkvo")
	}
	if p.CPUMoE > 0 {
		f = append(f, "--n-cpu-moe", strconv.Itoa(p.CPUMoE))
	}
	f = append(f, p.Embedding.flags()...)
	f = append(f, p.Serving.flags()...)
	f = append(f, p.Companions.Flags()...)
	f = append(f, p.Spec.flags()...)
	return append(f, p.Pass...)
}

// The flags whose values headroom writes in more than one place (a
// profile's Args, a search's kept settings, a fix), each written here
// once.

func ctxFlag(n int) []string { return []string{"-c", strconv.Itoa(n)} }

// nglFlag writes GPULayersAuto as all: without --fit, llama.cpp's auto
// offloads every layer.
func nglFlag(n int) []string {
	if n == GPULayersAuto {
		return []string{"-ngl", "all"}
	}
	return []string{"-ngl", strconv.Itoa(n)}
}

// noMmapFlag loads the weights instead of mapping them: --load-mode
// none for the builds that have it (de3ff81 refuses --no-mmap).
func noMmapFlag(r builds.Rules) []string {
	if r.LoadMode {
		return []string{"--load-mode", "none"}
	}
	return []string{"--no-mmap"}
}

func cacheRAMFlag(n int) []string    { return []string{"-cram", strconv.Itoa(n)} }
func checkpointsFlag(n int) []string { return []string{"-ctxcp", strconv.Itoa(n)} }

// LoadArgs are Args without the flags for what llama-server keeps past
// the load (-cram, -ctxcp, -cms): what llama-fit-params, which refuses
// them, is given to project the same load.
func (p Profile) LoadArgs() []string {
	p.Serving = nil
	return p.Args()
}

func explain(p *Plan, m *arch.Model, o SearchOptions, ceiling int, gpus, unified bool, mapWaste int64) []string {
	c := p.Chosen
	var out []string
	out = append(out, fmt.Sprintf("%s of %d cells each (%d in all), keeping at least %d MiB free in every domain (least margin %d MiB)",
		plural(o.Parallel, "slot"), c.CtxPerSlot, c.Profile.Ctx, o.FitTarget>>20, c.MinMargin>>20))
	if c.CtxPerSlot == ceiling && o.Fixed.Ctx == 0 {
		out = append(out, fmt.Sprintf("each slot is capped at the model's trained context of %d: more would be incoherent, so spare memory is better spent on more slots (--parallel)", ceiling))
	}
	switch {
	case !gpus:
		out = append(out, "no GPU: everything runs on the CPU")
	case unified:
		out = append(out, "the GPU shares one memory pool with the CPU, so every layer stays on the GPU: moving layers to the CPU would free nothing")
	case c.GPULayers == m.NLayer+1 && c.Profile.CPUMoE > 0:
		out = append(out, fmt.Sprintf("every layer's attention and dense weights are on the GPU; the routed experts of the first %d of %d layers stay in system memory (--n-cpu-moe %d), as llama.cpp's fit places a mixture of experts: each token reads only its %d chosen experts there", c.Profile.CPUMoE, m.NLayer, c.Profile.CPUMoE, m.NExpertUsed))
	case c.GPULayers == m.NLayer+1:
		out = append(out, "every layer, and the output layer, is on the GPU")
	default:
		out = append(out, fmt.Sprintf("%d of %d layers on the GPU (the output layer counts as one); the rest run from system memory, which is slower", c.GPULayers, m.NLayer+1))
	}
	switch fx := o.Fixed; {
	case fx.CacheK != "" || fx.CacheV != "":
	case c.Profile.CacheK == "q8_0" && fx.Ctx > 0:
		out = append(out, "q8_0 K/V cache with flash attention: it halves the cache per token, and with f16 fewer layers would fit this context")
	case c.Profile.CacheK == "q8_0":
		out = append(out, "q8_0 K/V cache with flash attention: it halves the cache per token, and f16 could not reach this context")
	}
	if !c.Profile.Mmap && o.Base.Mmap {
		out = append(out, fmt.Sprintf("--no-mmap: with the file mapped, Metal would keep %d MiB more resident than its weights (it maps the span between its first and last tensor, and this file stores some away from the layers); loading the weights instead buys this plan", mapWaste>>20))
	}
	if line := companionLine(c.Result, c.Profile.Spec); line != "" {
		out = append(out, line)
	}
	if line := rpcLine(c.Flags); line != "" {
		out = append(out, line, rpcHostsLine(c))
	}
	if o.Fixed.any() {
		out = append(out, fmt.Sprintf("kept as given and checked: %s", o.Fixed.flags()))
	}
	if len(o.Base.Overrides) > 0 {
		out = append(out, fmt.Sprintf("tensor overrides kept as given in every candidate: -ot %s", overrideFlag(o.Base.Overrides)))
	}
	if r := p.RunnerUp; r != nil {
		out = append(out, fmt.Sprintf("runner-up: %d cells per slot, -ngl %d, %s cache (%s)", r.CtxPerSlot, r.GPULayers, r.Profile.CacheK, argsString(r.Flags)))
	}
	return out
}

// companionLine says what the projector and draft take in the chosen
// plan, which every candidate counted.
func companionLine(a *Assessment, spec *Speculative) string {
	if a == nil {
		return ""
	}
	sum := map[string]int64{}
	for _, b := range a.Buffers {
		if b.Model != "" {
			sum[b.Model] += b.Bytes
		}
	}
	var parts []string
	if n, ok := sum[ModelProjector]; ok {
		parts = append(parts, fmt.Sprintf("the projector %d MiB (its compute buffer a rough estimate)", n>>20))
	}
	if n, ok := sum[ModelDraft]; ok {
		what := "the draft model %d MiB (its weights, and one context beside the model's with every slot's cells)"
		if spec.MTP() {
			what = "the MTP head's draft context %d MiB (its layer's cache, one output row a slot, its compute buffer)"
		}
		parts = append(parts, fmt.Sprintf(what, n>>20))
	}
	if len(parts) == 0 {
		return ""
	}
	return "counted in every candidate: " + strings.Join(parts, " and ")
}

func argsString(f []string) string {
	s := ""
	for i, x := range f {
		if i > 0 {
			s += " "
		}
		s += x
	}
	return s
}

// plural writes "1 slot", "2 slots".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// rpcFlags names the rpc-servers a plan uses and pins its layer split:
// llama.cpp would otherwise split by the free memory the devices report
// at load time, which need not be what the plan was made for. The split
// lists each device's layers (the output layer counts on its device) in
// llama.cpp's device order, RPC devices first.
func rpcFlags(nLayer int, p Profile, cpu Device, gpus []Device) []string {
	var endpoints []string
	for _, g := range gpus {
		if g.Endpoint != "" && !slices.Contains(endpoints, g.Endpoint) {
			endpoints = append(endpoints, g.Endpoint)
		}
	}
	if len(endpoints) == 0 {
		return nil
	}
	if len(p.TensorSplit) > 0 {
		return []string{"--rpc", strings.Join(endpoints, ",")} // flagsFor gave -ts
	}
	counts := map[string]int{}
	for _, d := range placeLayers(nLayer, p.GPULayers, p.TensorSplit, gpus, cpu.Name) {
		counts[d]++
	}
	split := make([]float64, len(gpus))
	for i, g := range gpus {
		split[i] = float64(counts[g.Name])
	}
	return []string{"--rpc", strings.Join(endpoints, ","), "-ts", splitString(split)}
}

// splitString renders a tensor split of whole layer counts as -ts takes it.
func splitString(split []float64) string {
	parts := make([]string, len(split))
	for i, x := range split {
		parts[i] = strconv.FormatFloat(x, 'f', -1, 64)
	}
	return strings.Join(parts, ",")
}

// rpcLine says how a plan's layers are split over rpc-servers, from its
// --rpc and -ts flags; "" when it uses none.
func rpcLine(flags []string) string {
	var endpoints, split string
	for i := 0; i+1 < len(flags); i++ {
		switch flags[i] {
		case "--rpc":
			endpoints = flags[i+1]
		case "-ts":
			split = flags[i+1]
		}
	}
	if endpoints == "" {
		return ""
	}
	return fmt.Sprintf("layers per device, remote ones first as llama.cpp orders them: -ts %s over the rpc-server(s) %s and this machine; each host's memory is its own domain, checked separately (start rpc-server on each before llama-server)", split, endpoints)
}
