package engine

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/headroom-llm/headroom/plan"
)

// Logged is one buffer-size line of llama.cpp's log: an allocation the
// engine actually made, as it printed it.
type Logged struct {
	// Source is the function that printed the line: load_tensors,
	// llama_context, llama_kv_cache, llama_memory_recurrent, sched_reserve...
	Source string `json:"source"`
	// Device is the name llama.cpp printed before the kind: a buffer type
	// (CPU_Mapped, CPU_REPACK, CUDA_Host, Vulkan_Host) or a device (CPU,
	// CUDA0, Vulkan0, MTL0).
	Device string `json:"device_or_buffer_type"`
	// Kind is model, kv, rs, compute or output.
	Kind string `json:"kind"`
	// Cache names the KV cache a kv buffer belongs to: "" for a plain
	// cache, "non-SWA" or "SWA" for the two caches of an iswa memory.
	Cache string `json:"cache"`
	// MiB is the printed figure as a number.
	MiB float64 `json:"mib"`
	// Printed is the figure as printed (two decimals), with a decimal
	// comma written as a point. It is the comparable value: llama.cpp
	// rounds bytes/2^20 with %.2f.
	Printed string `json:"printed"`
	// Model is plan.ModelDraft for the speculative draft context's
	// buffers (and a -md draft's weights), logged after llama-server's
	// "common_speculative_init_result:" line; "" for the model's own.
	Model string `json:"model,omitempty"`
}

// draftStart is the line llama-server logs before it loads a -md draft
// or makes the draft context on the model's own MTP head.
const draftStart = "common_speculative_init_result: "

// modelStart is the line llama-server logs before it loads the model.
const modelStart = "load_model: loading model "

// These follow the printf formats of llama.cpp's llama-model.cpp,
// llama-context.cpp, llama-kv-cache*.cpp and llama-memory-recurrent.cpp,
// and the conformance harness (conformance/harness/parse.mjs), whose
// golden files the tests hold this parser to. The leading (?:^|\s) lets a
// line carry llama-server's "0.01.234.567 I " prefix (or any other) before
// the printing function's name.
var (
	// The figure may carry a decimal comma: llama.cpp prints with the C
	// library's printf, and a program that sets a locale (a German or
	// Italian desktop) gets "166,92 MiB".
	bufferLine = regexp.MustCompile(`(?:^|\s)(~?\w+):\s+(\S+)\s+(.+?) buffer size = +(-?\d+[.,]\d+) MiB$`)
	// legacyModelLine is the weights line of builds before late 2024,
	// which named no kind: "llm_load_tensors:      CUDA0 buffer size =
	// 6695.84 MiB".
	legacyModelLine = regexp.MustCompile(`(?:^|\s)(llm_load_tensors):\s+(\S+) buffer size = +(-?\d+[.,]\d+) MiB$`)
	cacheStart      = regexp.MustCompile(`(?:^|\s)(\w+): creating +(.+?) (?:KV )?cache(?:, size = (\d+) cells)?$`)
	// ansiEscape matches the colour codes llama.cpp adds with --log-colors.
	ansiEscape = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")
	spaces     = regexp.MustCompile(`\s+`)
)

// kindOf maps the phrase before "buffer size" to a buffer kind. Phrases
// outside the table (forks print others) become lower_snake_case, as the
// harness does, so they still show up rather than vanish.
func kindOf(phrase string) string {
	switch phrase {
	case "model":
		return "model"
	case "KV":
		return "kv"
	case "RS":
		return "rs"
	case "compute":
		return "compute"
	case "output":
		return "output"
	}
	return strings.ToLower(spaces.ReplaceAllString(phrase, "_"))
}

// cleanLine removes what a terminal or a pipe adds to a log line: colour
// codes, the line ending, trailing blanks.
func cleanLine(line string) string {
	if strings.IndexByte(line, 0x1b) >= 0 {
		line = ansiEscape.ReplaceAllString(line, "")
	}
	return strings.TrimRight(line, " \t\r\n")
}

// ParseLog lists the buffers llama.cpp reports in its log, in log order.
// Lines may carry a prefix (llama-server's timestamps and level letter)
// before the printing function's name. The context destructor's
// "~llama_context: ... compute buffer size is ..." checks, printed by
// checking builds, are not allocations and are skipped.
//
// A kv line belongs to the KV cache most recently announced by a
// "creating ... KV cache" line (iswa memories print one for the non-SWA and
// one for the SWA cache); with no announcement its Cache is "".
//
// Lines after the draft's start are the draft's (Logged.Model). Its
// scheduler is reserved a second time once its backend samplers are
// attached; the buffer is the last reserve's, which replaces the first.
func ParseLog(lines []string) []Logged {
	var out []Logged
	cache, model := "", ""
	for _, raw := range lines {
		line := cleanLine(raw)
		if strings.Contains(line, draftStart) {
			model, cache = plan.ModelDraft, ""
			continue
		}
		if strings.Contains(line, modelStart) {
			// llama-server loads the model again (after sleeping):
			// its buffers are the model's until the next draft.
			model = ""
			continue
		}
		if !strings.Contains(line, "buffer size = ") {
			if strings.Contains(line, "creating") {
				if m := cacheStart.FindStringSubmatch(line); m != nil {
					cache = spaces.ReplaceAllString(strings.TrimSpace(m[2]), " ")
				}
			}
			continue
		}
		m := bufferLine.FindStringSubmatch(line)
		if m == nil {
			if l := legacyModelLine.FindStringSubmatch(line); l != nil {
				m = []string{l[0], l[1], l[2], "model", l[3]}
			}
		}
		if m == nil {
			continue
		}
		if strings.TrimSpace(m[3]) == "" {
			continue // no kind between the device and "buffer size"
		}
		printed := strings.Replace(m[4], ",", ".", 1)
		mib, err := strconv.ParseFloat(printed, 64)
		if err != nil {
			continue
		}
		kind := kindOf(strings.TrimSpace(m[3]))
		l := Logged{Source: m[1], Device: m[2], Kind: kind, MiB: mib, Printed: printed, Model: model}
		if kind == "kv" {
			l.Cache = cache
		}
		if model != "" && kind == "compute" {
			if i := slices.IndexFunc(out, func(o Logged) bool { return o.Model == model && o.Kind == kind && o.Device == l.Device }); i >= 0 {
				out[i] = l
				continue
			}
		}
		out = append(out, l)
	}
	return out
}

// parseRelevant reports whether ParseLog reads anything from a line, so a
// long-running server can keep just those lines of an unbounded log.
func parseRelevant(line string) bool {
	return strings.Contains(line, "buffer size = ") || strings.Contains(line, "creating") || strings.Contains(line, draftStart) || strings.Contains(line, modelStart)
}

// LastLoad keeps the buffers of the last load in a log. llama-server's own
// fit may load the model virtually before the real load and print its
// buffers too; a model's weights are always printed first, so the last run
// of model lines starts the real load.
func LastLoad(logged []Logged) []Logged { return LastLoads(logged, 1) }

// LastLoads keeps the buffers of the last n loads in a log: a model and
// its draft are two, one after the other.
func LastLoads(logged []Logged, n int) []Logged {
	var starts []int
	for i := range logged {
		if logged[i].Kind == "model" && (i == 0 || logged[i-1].Kind != "model") {
			starts = append(starts, i)
		}
	}
	if len(starts) == 0 {
		return logged
	}
	return logged[starts[max(len(starts)-n, 0)]:]
}
