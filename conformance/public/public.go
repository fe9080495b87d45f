// Package public holds llama.cpp loads that people pasted into public
// issues and discussions: CUDA, Metal and ROCm logs that headroom's own
// conformance suite (CPU and Vulkan on llvmpipe) cannot produce. Each case
// keeps the log lines as they were read at their source, what they say
// about the model, flags and build, and the buffers engine.ParseLog reads
// from them. Nothing in a case is filled in: a figure, flag or name the
// source does not show is left out or listed in Inferred with how it was
// worked out.
package public

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/headroom-llm/headroom/builds"
	"github.com/headroom-llm/headroom/conformance"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/headroom-llm/headroom/catalog"
	"github.com/headroom-llm/headroom/engine"
	"github.com/headroom-llm/headroom/plan"
	"github.com/headroom-llm/headroom/synth"
)

// Case is one public load.
type Case struct {
	// ID names the case (the file's base name without .json).
	ID     string `json:"id"`
	Source Source `json:"source"`
	// Backend is CUDA, Metal or ROCm.
	Backend string `json:"backend"`
	// GPUs are the devices as the log describes them, in device order.
	GPUs []string `json:"gpus"`
	// Build is llama.cpp's "build: N (commit)" or "version: N (commit)"
	// as printed; "" when the source does not show it, and then
	// BuildNote says what dates the log (its log format, the thread's
	// date).
	Build string `json:"build"`
	// BuildNumber is the upstream build number the log prints (llama.cpp's
	// bNNNN), 0 where it prints none or a rebuild's own count. The rules
	// it implies (builds.For) must agree with BuildRules.
	BuildNumber int    `json:"build_number,omitempty"`
	BuildNote   string `json:"build_note,omitempty"`
	Model       Model  `json:"model"`
	// Shape is the architecture for synth, in the catalog's terms; nil
	// when the model cannot be built honestly (the case is then listed
	// as "no shape"). ShapeSource says where its figures come from.
	Shape       *catalog.ShapeSpec `json:"shape,omitempty"`
	ShapeSource string             `json:"shape_source,omitempty"`
	Flags       Flags              `json:"flags"`
	// BuildOutputs is the output rows the build's worst-case graph held,
	// where it is not headroom's rule (one per slot): n_ubatch in builds
	// whose llama_context reserved graph_reserve(n_tokens, n_seqs,
	// n_tokens) before llama-server capped outputs. 0 when the build
	// follows headroom's rule or it is not known. The comparison then
	// also plans with that many rows, to show what the rule accounts for.
	BuildOutputs int `json:"build_outputs,omitempty"`
	// BuildRules are the rules the build follows where its log or date
	// shows them, every one spelled out: an output buffer of n_batch
	// logits rows before llama.cpp PR #6122 (March 2024) or with an
	// embedding row beside each (output_rows, output_embd), a context
	// padded to 32 cells without flash attention (ctx_pad, build 4715 of
	// February 2025), Metal graphs unreordered before PR #15929
	// (metal_reorder false), and so on. The comparison also plans under
	// them.
	BuildRules *builds.Rules `json:"build_rules,omitempty"`
	// Inferred lists what was worked out from printed figures rather
	// than read (a flag with no command line shown), one entry each,
	// saying from what.
	Inferred []string `json:"inferred,omitempty"`
	// Complete says Lines hold every buffer line of the load. A public
	// excerpt often holds only part of the log; a group headroom plans
	// that an incomplete case lacks is then not a miss.
	Complete bool `json:"complete"`
	// DeviceNames maps a name the log prints to the one headroom gives
	// the same buffer, where they differ (older Metal builds print
	// "Metal" for what headroom and newer builds call MTL0).
	DeviceNames map[string]string `json:"device_names,omitempty"`
	// Lines are the log lines used, verbatim (prefixes and all).
	Lines []string `json:"lines"`
	// Buffers are engine.ParseLog(Lines), kept so a change in the parser
	// shows up as a change in the data.
	Buffers []engine.Logged `json:"buffers"`
	// PartialGroups are groups, keyed like Explanations, of which the
	// lines hold only some (one KV cache of two), with what is missing:
	// their figures are shown and not compared.
	PartialGroups map[string]string `json:"partial_groups,omitempty"`
	// Explanations say why headroom misses a buffer group, keyed
	// "BUFFER_TYPE kind" in headroom's names, each from reading
	// llama.cpp's source (file and function named) or saying it is
	// unexplained.
	Explanations map[string]string `json:"explanations,omitempty"`

	// Path is the file the case was read from.
	Path string `json:"-"`
}

// Source is where the log was read.
type Source struct {
	URL   string `json:"url"`
	Title string `json:"title"`
	// Date is the post's date (YYYY-MM-DD) where the source shows it.
	Date string `json:"date,omitempty"`
	// Where says which post of the thread holds the lines.
	Where string `json:"where"`
}

// Model is what the log says about the model file.
type Model struct {
	// Name is the model as the log names it (general.name, the file
	// name, the thread's title).
	Name string `json:"name"`
	// Repo and File name the GGUF where the log shows them.
	Repo string `json:"repo,omitempty"`
	File string `json:"file,omitempty"`
	// Arch is general.architecture.
	Arch string `json:"arch"`
	// Quant is the synth recipe the comparison builds; QuantKnown says
	// the log shows the file is that recipe's mix (a file type printed,
	// a file named by it from a publisher that quantizes with stock
	// llama-quantize). When it is false the weights are not held to
	// exactness: QuantNote says what is known.
	Quant      string `json:"quant"`
	QuantKnown bool   `json:"quant_known"`
	QuantNote  string `json:"quant_note,omitempty"`
	// QuantRules are the older llama-quantize rules that made the file,
	// where they type tensors otherwise than synth's recipe; the build's
	// plan (BuildBytes) reads the file they give.
	QuantRules *synth.QuantRules `json:"quant_rules,omitempty"`
	// SplitFiles is the number of files the model was split into
	// (llama-gguf-split), where more than one: the comparison plans
	// synth's single file, so its mapped spans are shown, not held to
	// exactness.
	SplitFiles int `json:"split_files,omitempty"`
}

// Flags are the load's settings in llama-server's terms.
type Flags struct {
	// Command is the command line as posted, "" when none was.
	Command   string `json:"command,omitempty"`
	Ctx       int    `json:"ctx"`
	Parallel  int    `json:"parallel"`
	GPULayers int    `json:"gpu_layers"`
	// FlashAttn is on or off: what the log says was in effect.
	FlashAttn string `json:"flash_attn"`
	CacheK    string `json:"cache_type_k"`
	CacheV    string `json:"cache_type_v"`
	Batch     int    `json:"batch"`
	UBatch    int    `json:"ubatch"`
	CPUMoE    int    `json:"cpu_moe,omitempty"`
	// Overrides are the command's -ot/--override-tensor values, each
	// PATTERN=BUFFER_TYPE (plan.ParseOverrides reads them).
	Overrides []string `json:"override_tensor,omitempty"`
	// KVUnified is a single KV cache shared by every sequence
	// (--kv-unified), as the log's kv_unified line shows it.
	KVUnified bool `json:"kv_unified,omitempty"`
	// TensorSplit is -ts, or the split the log's per-device lines show
	// where the GPUs' free memory is not printed (listed in Inferred).
	TensorSplit []float64 `json:"tensor_split,omitempty"`
	NoMmap      bool      `json:"no_mmap,omitempty"`
	// GPUNoEvents: the GPUs report no events capability, so the load ran
	// without pipeline parallelism (plan.Device.NoEvents); listed in
	// Inferred with the evidence.
	GPUNoEvents bool `json:"gpu_no_events,omitempty"`
	// GPUFreeMiB is each GPU's free memory at load, which splits layers
	// across several GPUs; from the log's "using device ... MiB free"
	// lines, or, where those are not shown, worked out from the logged
	// split and listed in Inferred.
	GPUFreeMiB []int64 `json:"gpu_free_mib,omitempty"`
	// CPUFeatures are the system_info flags the CPU backend printed
	// (avx2, avx512, neon, ...), which decide what it repacks.
	CPUFeatures []string `json:"cpu_features,omitempty"`
}

// Backends are the GPU backends a case may be from.
var Backends = []string{"CUDA", "Metal", "ROCm"}

// Load reads and validates every case (*.json) in dir, sorted by id.
func Load(dir string) ([]Case, error) {
	return conformance.LoadDir(dir, "public cases", func(path string, data []byte) (Case, []string, error) {
		var c Case
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return Case{}, nil, err
		}
		c.Path = path
		return c, c.validate(strings.TrimSuffix(filepath.Base(path), ".json")), nil
	})
}

// validate lists what is missing or inconsistent in a case.
func (c *Case) validate(base string) []string {
	var bad []string
	if c.ID != base {
		bad = append(bad, fmt.Sprintf("id %q is not the file name %q", c.ID, base))
	}
	if !strings.HasPrefix(c.Source.URL, "https://github.com/") || c.Source.Title == "" || c.Source.Where == "" {
		bad = append(bad, "source needs a github.com url, a title and where in the thread")
	}
	if c.Build == "" && c.BuildNote == "" {
		bad = append(bad, "no build and no build_note saying what dates the log")
	}
	if !slices.Contains(Backends, c.Backend) {
		bad = append(bad, fmt.Sprintf("backend %q is not one of %v", c.Backend, Backends))
	}
	if len(c.GPUs) == 0 {
		bad = append(bad, "no gpus")
	}
	if c.Model.Name == "" || c.Model.Arch == "" {
		bad = append(bad, "model needs a name and an arch")
	}
	if c.Shape != nil {
		if c.ShapeSource == "" {
			bad = append(bad, "a shape needs shape_source")
		}
		if _, err := c.Shape.Resolve(); err != nil {
			bad = append(bad, err.Error())
		}
		if _, err := synth.ParseQuant(c.Model.Quant); err != nil {
			bad = append(bad, err.Error())
		}
		if !c.Model.QuantKnown && c.Model.QuantNote == "" {
			bad = append(bad, "an unknown quant mix needs quant_note")
		}
	}
	f := c.Flags
	if f.Ctx <= 0 || f.Parallel <= 0 || f.Batch <= 0 || f.UBatch <= 0 || f.GPULayers < 0 {
		bad = append(bad, "flags need ctx, parallel, batch, ubatch and a gpu_layers count")
	}
	if f.FlashAttn != "on" && f.FlashAttn != "off" {
		bad = append(bad, "flash_attn must be on or off, as the log shows it in effect")
	}
	if _, err := plan.ParseOverrides(f.Overrides...); err != nil {
		bad = append(bad, err.Error())
	}
	if len(f.GPUFreeMiB) != 0 && len(f.GPUFreeMiB) != len(c.GPUs) {
		bad = append(bad, "gpu_free_mib needs one figure per GPU")
	}
	if len(c.Lines) == 0 {
		bad = append(bad, "no log lines")
	}
	if got := engine.ParseLog(c.Lines); !reflect.DeepEqual(got, c.Buffers) && !(len(got) == 0 && len(c.Buffers) == 0) {
		bad = append(bad, "buffers are not what engine.ParseLog reads from the lines")
	}
	for k, v := range c.PartialGroups {
		if len(strings.Fields(k)) != 2 || strings.TrimSpace(v) == "" {
			bad = append(bad, fmt.Sprintf("partial group %q needs a \"BUFFER_TYPE kind\" key and text", k))
		}
	}
	for k, v := range c.Explanations {
		if len(strings.Fields(k)) != 2 || strings.TrimSpace(v) == "" {
			bad = append(bad, fmt.Sprintf("explanation %q needs a \"BUFFER_TYPE kind\" key and text", k))
		}
	}
	return bad
}

// ExpertsInSystemMemory says whether the load kept routed experts in
// system memory while their layers ran on a GPU: --n-cpu-moe or
// --cpu-moe, or an -ot override that sends an expert tensor
// (blk.N.ffn_up_exps.weight) to the CPU, alone or with the rest of its
// layer's FFN.
func (c *Case) ExpertsInSystemMemory() bool {
	if c.Flags.CPUMoE > 0 {
		return true
	}
	// Load refused a case whose overrides do not parse.
	overrides, _ := plan.ParseOverrides(c.Flags.Overrides...)
	for _, o := range overrides {
		if o.Buft != "CPU" {
			continue
		}
		for il := range 256 {
			if o.Matches(fmt.Sprintf("blk.%d.ffn_up_exps.weight", il)) {
				return true
			}
		}
	}
	return false
}

// HeadroomName is the name headroom gives the buffer type a log line
// names.
func (c *Case) HeadroomName(logged string) string {
	if n, ok := c.DeviceNames[logged]; ok {
		return n
	}
	return logged
}
