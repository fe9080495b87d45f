package conformance

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Kinds are the buffer kinds a golden file may hold, as DESIGN.md names them.
var Kinds = []string{"model", "kv", "rs", "compute", "output"}

// Load reads and validates every golden file (*.json) in dir, sorted by id.
// A file that fails validation is an error naming the file and every
// problem found in it.
func Load(dir string) ([]Case, error) {
	return LoadDir(dir, "golden files", func(path string, data []byte) (Case, []string, error) {
		c, err := decodeCase(data)
		if err != nil {
			return Case{}, nil, err
		}
		c.Path = path
		return *c, c.validate(), nil
	})
}

// LoadDir reads every *.json file of dir in name order and gives each to
// decode, which returns the value and the problems validation found; a
// file that fails is an error naming it, and the errors of every file
// are joined. what names the files in the error for an empty dir.
func LoadDir[T any](dir, what string, decode func(path string, data []byte) (T, []string, error)) ([]T, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("conformance: no %s in %s", what, dir)
	}
	sort.Strings(paths)
	var out []T
	var errs []error
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		v, problems, err := decode(p, data)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", filepath.Base(p), err))
			continue
		}
		if len(problems) > 0 {
			errs = append(errs, fmt.Errorf("%s: %s", filepath.Base(p), strings.Join(problems, "; ")))
			continue
		}
		out = append(out, v)
	}
	return out, errors.Join(errs...)
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// gpuDevicePrefix is how llama.cpp names the devices of a GPU backend
// (Vulkan0, CUDA0): a case that offloaded layers must show one there.
var gpuDevicePrefix = map[string]string{"vulkan": "Vulkan", "cuda": "CUDA"}

// validate lists what is missing or inconsistent in a case. Rounding: every
// printed MiB figure is within 0.005 of the true value, so a sum of n of
// them is within 0.005*n of the sum printed elsewhere (plus that one's own
// 0.005).
func (c *Case) validate() []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }

	if c.Schema != 1 {
		fail("schema %d, want 1", c.Schema)
	}
	if want := strings.TrimSuffix(filepath.Base(c.Path), ".json"); c.ID != want {
		fail("id %q does not match the file name %q", c.ID, want)
	}
	in, p := c.Inputs, c.Inputs.Profile
	if in.Shape == "" || in.Arch == "" || in.Quant == "" {
		fail("inputs lack shape, arch or quant")
	}
	if !sha256Hex.MatchString(in.File.HeaderSHA256) || in.File.SizeBytes <= 0 || in.File.HeaderBytes <= 0 {
		fail("inputs.file lacks its size or header digest")
	}
	switch p.Backend {
	case "cpu":
		if p.GPULayers != 0 && p.RPCServers == 0 {
			fail("cpu backend with gpu_layers %d", p.GPULayers)
		}
		if p.RPCServers > 0 && (len(c.RPCEndpoints()) != p.RPCServers || len(c.Engine.RPCServers) != p.RPCServers) {
			fail("%d rpc-servers, but the command names %v and the engine records %d", p.RPCServers, c.RPCEndpoints(), len(c.Engine.RPCServers))
		}
	case "vulkan", "cuda":
	default:
		fail("unknown backend %q", p.Backend)
	}
	if p.ContextSizePerSeq <= 0 || p.Sequences <= 0 || p.BatchSize <= 0 {
		fail("profile lacks context size, sequences or batch size")
	}
	if p.FlashAttention == "" || p.CacheTypeK == "" || p.CacheTypeV == "" {
		fail("profile lacks flash attention or cache types")
	}
	switch c.Engine.Driver {
	case DriverServer:
		if len(c.Inputs.Command) == 0 || !strings.HasPrefix(c.Engine.Version, "version: ") {
			fail("a llama-server load lacks its command or its --version line")
		}
	case "", DriverLibrary:
		if pc := c.Inputs.Passed.Context; pc.ContextSize < p.NCtx() || pc.Sequences != p.Sequences || pc.BatchSize < p.BatchSize ||
			c.Inputs.Passed.Model.UseMmap != p.MMap || !sameGPULayers(c.Inputs.Passed.Model.GPULayers, p.GPULayers) {
			fail("passed_to_llama_cpp %+v does not fit the profile", c.Inputs.Passed)
		}
	default:
		fail("unknown driver %q", c.Engine.Driver)
	}
	if c.Engine.LlamaCppRelease == "" || c.Engine.NodeLlamaCpp == "" || c.Engine.Backend != p.Backend {
		fail("engine lacks its release or names another backend")
	}

	f := c.Figures
	ctx := f.Context
	if ctx.NCtx <= 0 || ctx.NCtxSeq <= 0 || ctx.NBatch <= 0 || ctx.NUbatch <= 0 || ctx.FlashAttn == "" {
		fail("figures.context lacks n_ctx, n_ctx_seq, n_batch, n_ubatch or flash_attn")
	}
	if ctx.NSeqMax != p.Sequences {
		fail("n_seq_max %d, but the profile asked for %d sequences", ctx.NSeqMax, p.Sequences)
	}
	if !ctx.KVUnified && ctx.NCtx != ctx.NCtxSeq*ctx.NSeqMax {
		fail("n_ctx %d is not n_ctx_seq %d x n_seq_max %d", ctx.NCtx, ctx.NCtxSeq, ctx.NSeqMax)
	}

	nLayer, ok := c.PrintInfoInt("n_layer")
	if all, hasAll := c.PrintInfoInt("n_layer_all"); hasAll {
		// With NextN (MTP) blocks, print_info's n_layer leaves them out;
		// llama.cpp places all n_layer_all blocks and the output layer.
		nLayer = all
	}
	if !ok {
		fail("print_info lacks n_layer")
	} else if len(f.Layers) != nLayer+1 {
		fail("%d layer placements, want n_layer_all+1 = %d", len(f.Layers), nLayer+1)
	}
	for i, l := range f.Layers {
		if l.Layer != i || l.Device == "" {
			fail("layer placement %d is %+v", i, l)
			break
		}
	}
	if prefix := gpuDevicePrefix[p.Backend]; prefix != "" && p.GPULayers > 0 {
		if !slices.ContainsFunc(f.Layers, func(l Layer) bool { return strings.HasPrefix(l.Device, prefix) }) {
			fail("gpu_layers %d but no layer on a %s device", p.GPULayers, prefix)
		}
	}

	if p.RPCServers > 0 && p.GPULayers > 0 && !slices.ContainsFunc(f.Layers, func(l Layer) bool { return strings.HasPrefix(l.Device, "RPC") }) {
		fail("gpu_layers %d over rpc-servers but no layer on an RPC device", p.GPULayers)
	}

	bad = append(bad, c.validateBuffers(&c.Figures, "", []string{"model", "compute"})...)
	return append(bad, c.validateDraft()...)
}

// validateDraft checks the speculative draft context's figures: there
// for a speculative case only, with the target's cells and sequences.
func (c *Case) validateDraft() []string {
	p, d := c.Inputs.Profile, c.Figures.Draft
	if d == nil {
		if p.Spec != "" || p.Draft != "" {
			return []string{fmt.Sprintf("a speculative case (%q, draft %q) without the draft context's figures", p.Spec, p.Draft)}
		}
		return nil
	}
	// A draft context on the target's MTP head has no weights of its
	// own; a -md draft's are its model buffers.
	need := []string{"compute"}
	if p.Draft != "" {
		need = append(need, "model")
	}
	bad := c.validateBuffers(d, "draft ", need)
	if ctx := c.Figures.Context; d.Context.NSeqMax != p.Sequences || d.Context.NCtx != ctx.NCtx {
		bad = append(bad, fmt.Sprintf("the draft context has n_seq_max %d and n_ctx %d, the target %d and %d", d.Context.NSeqMax, d.Context.NCtx, ctx.NSeqMax, ctx.NCtx))
	}
	return bad
}

// validateBuffers checks one context's buffer lines (name says which in
// a message) and that it has a buffer of each kind in need.
func (c *Case) validateBuffers(f *Figures, name string, need []string) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, name+fmt.Sprintf(format, args...)) }

	seen := map[string]bool{}
	byKind := map[string][]Buffer{}
	for _, b := range f.Buffers {
		key := b.Kind + "/" + b.Cache + "/" + b.DeviceOrBufferType
		if seen[key] {
			fail("buffer %s listed twice", key)
		}
		seen[key] = true
		if !validKind(b.Kind) || b.DeviceOrBufferType == "" {
			fail("buffer %+v has no name or an unknown kind", b)
		}
		if v, err := strconv.ParseFloat(b.Printed, 64); err != nil || v != b.MiB || !strings.Contains(b.Printed, ".") {
			fail("buffer %s: printed %q does not read as %v", key, b.Printed, b.MiB)
		}
		if !c.logHas(b.DeviceOrBufferType, b.Printed, "buffer size") {
			fail("buffer %s: no log line prints %s MiB for it", key, b.Printed)
		}
		byKind[b.Kind] = append(byKind[b.Kind], b)
	}
	for _, kind := range need {
		if len(byKind[kind]) == 0 {
			fail("no %s buffer", kind)
		}
	}

	for _, kv := range f.KVCaches {
		var sum float64
		n := 0
		for _, b := range byKind["kv"] {
			if b.Cache == kv.Cache {
				sum += b.MiB
				n++
			}
		}
		if n == 0 || math.Abs(sum-kv.SizeMiB) > 0.005*float64(n+1)+1e-9 {
			fail("KV cache %q: %d buffers sum to %.2f MiB, its size line says %.2f", kv.Cache, n, sum, kv.SizeMiB)
		}
		if math.Abs(kv.KMiB+kv.VMiB-kv.SizeMiB) > 0.015 {
			fail("KV cache %q: K %.2f + V %.2f is not its size %.2f", kv.Cache, kv.KMiB, kv.VMiB, kv.SizeMiB)
		}
		if kv.Cells <= 0 || kv.KType == "" || (kv.CellsAnnounced != nil && *kv.CellsAnnounced != kv.Cells) {
			fail("KV cache %q: cells %d (announced %v), K type %q", kv.Cache, kv.Cells, kv.CellsAnnounced, kv.KType)
		}
	}
	if len(byKind["kv"]) > 0 && len(f.KVCaches) == 0 {
		fail("kv buffers without a KV cache size line")
	}
	if len(f.RSCaches) > 0 {
		var sum float64
		for _, b := range byKind["rs"] {
			sum += b.MiB
		}
		rs := f.RSCaches[0]
		if len(f.RSCaches) != 1 || math.Abs(sum-rs.SizeMiB) > 0.005*float64(len(byKind["rs"])+1)+1e-9 {
			fail("recurrent state: %d size lines, buffers sum to %.2f MiB", len(f.RSCaches), sum)
		}
	} else if len(byKind["rs"]) > 0 {
		fail("rs buffers without a recurrent state size line")
	}

	if len(f.ComputeExact) != len(byKind["compute"]) {
		fail("%d compute buffers but %d destructor checks", len(byKind["compute"]), len(f.ComputeExact))
	}
	for _, ce := range f.ComputeExact {
		found := false
		for _, b := range byKind["compute"] {
			if b.DeviceOrBufferType == ce.DeviceOrBufferType {
				found = true
				// Both are roundings of one size: 4 and 2 decimals.
				if math.Abs(ce.MiB-b.MiB) > 0.00505 {
					fail("compute %s: the destructor says %s MiB, the buffer line %s", b.DeviceOrBufferType, ce.Printed, b.Printed)
				}
			}
		}
		if !found {
			fail("destructor check for %s, which has no compute buffer", ce.DeviceOrBufferType)
		}
	}
	return bad
}

// sameGPULayers allows node-llama-cpp to clamp "all" (999) to the model's
// layer count.
func sameGPULayers(passed, asked int) bool {
	return passed == asked || (asked >= 999 && passed > 0 && passed <= asked)
}

func validKind(k string) bool {
	for _, want := range Kinds {
		if k == want {
			return true
		}
	}
	return false
}

// logHas reports whether some kept log line holds all the given pieces.
func (c *Case) logHas(pieces ...string) bool {
	for _, line := range c.Log {
		all := true
		for _, p := range pieces {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
