package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/internal/term"
	"github.com/headroom-llm/headroom/source"
)

func runInspect(ctx context.Context, env Env, args []string) error {
	fs := newFlags(env, "inspect", "[flags] MODEL", `
Reads only the GGUF header of MODEL (never the weights) and describes it:
architecture, hyperparameters, parameter count, file size, and how many
tensors and bytes each ggml type holds.

MODEL is a local path, an https:// URL, or a Hugging Face reference:
  hf:owner/repo/file.gguf[@revision]   one file (all shards if it is split)
  hf:owner/repo:QUANT[@revision]       the file for a quant tag, as llama.cpp's -hf picks it
  ENTRY/QUANT                          a catalog variant, as recommend lists it
                                       (offline: the header fit and plan read)
Remote headers are read with HTTP range requests (a few MiB) and cached by
immutable commit, so a second look costs no download. HF_ENDPOINT and
HF_TOKEN are honoured; the token is never printed.

Examples:
  headroom inspect model.gguf
  headroom inspect hf:Qwen/Qwen3-8B-GGUF:Q4_K_M --json
  headroom inspect model-00001-of-00003.gguf --tensors`)
	asJSON := fs.Bool("json", false, "print everything as one JSON object")
	tensors := fs.Bool("tensors", false, "list every tensor with shape, type, bytes and offset")
	full := fs.Bool("full", false, "with --json, print metadata arrays and strings whole (a vocabulary can be 10 MiB, a hostile string 250 MiB)")
	quiet := fs.Bool("quiet", false, "print no progress on standard error")
	ref, err := fs.parseModel(args)
	if err != nil {
		return err
	}
	// A catalog variant is its file on the Hub (the locked commit when
	// the lock pins it), as pull and serve read it.
	_, lock, e, v, err := catalogVariant(ref)
	if err != nil {
		return err
	}
	given := ref
	if e != nil {
		ref = lock.Source(e, *v)
	}
	h, err := openModel(ctx, env, ref, *quiet)
	if e != nil && (errors.Is(err, source.ErrUnreachable) || errors.Is(err, source.ErrNotCached)) {
		// Offline, a catalog variant is what fit and plan read for it.
		var what string
		if h, what, err = catalogHeader(given, lock, e, *v); err == nil {
			fmt.Fprintf(env.Stderr, "the Hub cannot be read (offline): inspecting %s\n", what)
		}
	}
	if err != nil {
		return err
	}
	if *asJSON && *full {
		return printFullJSON(ctx, env.Stdout, h)
	}
	if *asJSON {
		return printJSON(env.Stdout, inspectReport(h, jsonArrayLimit, jsonStringLimit))
	}
	printInspect(env.Stdout, h, *tensors)
	return nil
}

// openModel resolves and reads a model reference, with progress on
// standard error unless quiet.
func openModel(ctx context.Context, env Env, ref string, quiet bool) (*source.Header, error) {
	client := source.NewClient(env.Getenv)
	if !quiet {
		client.Log = func(msg string) { fmt.Fprintln(env.Stderr, term.Text(msg)) }
	}
	h, err := client.Open(ctx, ref)
	if badModel(err) {
		return nil, inputError{err}
	}
	return h, err
}

// badModel reports whether an error opening a model is the input's: a
// file that is not there or is a directory, a reference that is not one,
// or a GGUF that is truncated or corrupt.
func badModel(err error) bool {
	return err != nil && (errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.EISDIR) || errors.Is(err, source.ErrNotRegular) || errors.Is(err, source.ErrBadRef) ||
		errors.Is(err, gguf.ErrTruncated) || errors.Is(err, gguf.ErrLimit) || errors.Is(err, gguf.ErrFormat))
}

// jsonArrayLimit and jsonStringLimit cut long metadata arrays and strings
// (bytes) in JSON output unless --full; the row says when it was cut.
const (
	jsonArrayLimit  = 64
	jsonStringLimit = 4096
)

// textStringLimit cuts strings in the text output.
const textStringLimit = 200

type typeRow struct {
	Type     string  `json:"type"`
	Tensors  int     `json:"tensors"`
	Elements uint64  `json:"elements"`
	Bytes    uint64  `json:"bytes"`
	Share    float64 `json:"share"`
}

type metaRow struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Len   *int   `json:"len,omitempty"`
	Cut   bool   `json:"truncated,omitempty"`
	Value any    `json:"value"`
}

type tensorRow struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Shape  []uint64 `json:"shape"`
	Bytes  uint64   `json:"bytes"`
	Shard  int      `json:"shard"`
	Offset int64    `json:"offset"`
}

type inspectJSON struct {
	Artifact     *source.Artifact `json:"artifact"`
	Architecture string           `json:"architecture"`
	Name         string           `json:"name,omitempty"`
	FileType     string           `json:"file_type,omitempty"`
	Parameters   uint64           `json:"parameters"`
	SizeBytes    int64            `json:"size_bytes"`
	TensorBytes  uint64           `json:"tensor_bytes"`
	HeaderBytes  int64            `json:"header_bytes"`
	BitsPerWt    float64          `json:"bits_per_weight"`
	GGUFVersion  uint32           `json:"gguf_version"`
	Alignment    uint64           `json:"alignment"`
	TensorCount  int              `json:"tensor_count"`
	Types        []typeRow        `json:"types"`
	Metadata     []metaRow        `json:"metadata"`
	Tensors      []tensorRow      `json:"tensors"`
	Fetch        source.Stats     `json:"fetch"`
}

func inspectReport(h *source.Header, maxArray, maxString int) inspectJSON {
	m := h.Model
	first := m.Files[0]
	r := inspectJSON{
		Artifact:     h.Artifact,
		Architecture: m.Architecture(),
		Parameters:   m.Params(),
		SizeBytes:    m.Size(),
		TensorBytes:  m.TensorBytes(),
		HeaderBytes:  m.HeaderBytes(),
		GGUFVersion:  first.Version,
		Alignment:    first.Alignment,
		TensorCount:  len(m.Tensors),
		Fetch:        h.Stats,
		Types:        []typeRow{},
		Metadata:     []metaRow{},
		Tensors:      []tensorRow{},
	}
	r.Name, _ = m.Str("general.name")
	// Both are strings from the header, and may be as long as any.
	r.Name, r.Architecture = cutText(r.Name, maxString), cutText(r.Architecture, maxString)
	if ft, ok := m.Uint("general.file_type"); ok {
		r.FileType = gguf.FileTypeName(uint32(ft))
	}
	if r.Parameters > 0 {
		r.BitsPerWt = float64(r.TensorBytes) * 8 / float64(r.Parameters)
	}
	for _, ts := range m.ByType() {
		r.Types = append(r.Types, typeRow{Type: ts.Type.String(), Tensors: ts.Tensors, Elements: ts.Elements,
			Bytes: ts.Bytes, Share: share(ts.Bytes, r.TensorBytes)})
	}
	for _, kv := range first.Metadata {
		v, cut := kv.Value.JSONCut(maxArray, maxString)
		row := metaRow{Key: kv.Key, Type: kv.Value.Type().String(), Value: v, Cut: cut}
		if a, ok := kv.Value.AsArray(); ok {
			n := a.Len()
			row.Len = &n
			row.Type = "array[" + a.Elem().String() + "]"
		} else if str, ok := kv.Value.AsString(); ok && cut {
			n := len(str)
			row.Len = &n
		}
		r.Metadata = append(r.Metadata, row)
	}
	for _, t := range m.Tensors {
		r.Tensors = append(r.Tensors, tensorRow{Name: t.Name, Type: t.Type.String(), Shape: t.Shape,
			Bytes: t.Size, Shard: t.Shard, Offset: t.FileOffset})
	}
	return r
}

func share(part, whole uint64) float64 {
	if whole == 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// headline keys are shown first, in this order, under friendlier names.
var headline = []struct{ suffix, label string }{
	{"context_length", "trained context"},
	{"block_count", "layers"},
	{"embedding_length", "embedding"},
	{"feed_forward_length", "feed-forward"},
	{"attention.head_count", "attention heads"},
	{"attention.head_count_kv", "KV heads"},
	{"attention.key_length", "key length"},
	{"attention.value_length", "value length"},
	{"attention.sliding_window", "sliding window"},
	{"expert_count", "experts"},
	{"expert_used_count", "experts per token"},
	{"rope.freq_base", "rope base"},
}

func printInspect(w io.Writer, h *source.Header, withTensors bool) {
	r := inspectReport(h, 8, textStringLimit)
	m := h.Model
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	title := r.Name
	if title == "" {
		title = "(unnamed)"
	}
	// Every string below but the numbers comes from the header or the
	// listing, written by whoever made the file: term.Text escapes it.
	fmt.Fprintf(tw, "model\t%s\n", term.Text(title))
	fmt.Fprintf(tw, "architecture\t%s\n", term.Text(orDash(r.Architecture)))
	where := h.Artifact.Ref
	if h.Artifact.Commit != "" {
		where += "  @ " + h.Artifact.Commit
	}
	fmt.Fprintf(tw, "source\t%s\n", term.Text(where))
	files := "1 file"
	if n := len(m.Files); n > 1 {
		files = fmt.Sprintf("%d files (split)", n)
	}
	fmt.Fprintf(tw, "size\t%s (%s), %s\n", bytesSI(r.SizeBytes), bytesIEC(r.SizeBytes), files)
	params := count(r.Parameters)
	if r.FileType != "" {
		params += ", " + r.FileType
	}
	fmt.Fprintf(tw, "parameters\t%s, %.2f bits per weight\n", params, r.BitsPerWt)
	arch := r.Architecture + "."
	shown := map[string]bool{}
	for _, hl := range headline {
		if v, ok := m.Lookup(arch + hl.suffix); ok {
			fmt.Fprintf(tw, "%s\t%s\n", hl.label, v)
			shown[arch+hl.suffix] = true
		}
	}
	var rest []string
	for _, kv := range m.Files[0].Metadata {
		if strings.HasPrefix(kv.Key, arch) && !shown[kv.Key] {
			rest = append(rest, fmt.Sprintf("%s = %s", term.Text(strings.TrimPrefix(kv.Key, arch)), shortValue(kv.Value)))
		}
	}
	sort.Strings(rest)
	for i, s := range rest {
		label := ""
		if i == 0 {
			label = "other"
		}
		fmt.Fprintf(tw, "%s\t%s\n", label, s)
	}
	if tok, ok := m.Str("tokenizer.ggml.model"); ok {
		n := 0
		if v, ok := m.Lookup("tokenizer.ggml.tokens"); ok {
			if a, ok := v.AsArray(); ok {
				n = a.Len()
			}
		}
		pre, _ := m.Str("tokenizer.ggml.pre")
		if pre != "" {
			tok += ", " + pre
		}
		fmt.Fprintf(tw, "vocabulary\t%d tokens (%s)\n", n, term.Text(cutText(tok, textStringLimit)))
	}
	fmt.Fprintf(tw, "header\tGGUF v%d, %d metadata keys, %d tensors, %s of header, alignment %d\n",
		r.GGUFVersion, len(m.Files[0].Metadata), r.TensorCount, bytesIEC(r.HeaderBytes), r.Alignment)
	if h.Stats.RangeRequests > 0 || h.Stats.CacheHits > 0 {
		fmt.Fprintf(tw, "fetched\t%s in %d range requests, %d cache hits\n", bytesIEC(h.Stats.BytesFetched), h.Stats.RangeRequests, h.Stats.CacheHits)
	}
	tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "type\ttensors\tparameters\tbytes\tshare\t")
	for _, t := range r.Types {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.1f%%\t\n", t.Type, t.Tensors, count(t.Elements), bytesIEC(int64(t.Bytes)), 100*t.Share)
	}
	fmt.Fprintf(tw, "total\t%d\t%s\t%s\t\t\n", r.TensorCount, count(r.Parameters), bytesIEC(int64(r.TensorBytes)))
	tw.Flush()

	if withTensors {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "name\ttype\tshape\tbytes\tshard\toffset")
		for _, t := range r.Tensors {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\n", term.Text(cutText(t.Name, textStringLimit)), t.Type, shapeString(t.Shape), t.Bytes, t.Shard+1, t.Offset)
		}
		tw.Flush()
	}
}

func shapeString(s []uint64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return strings.Join(parts, "x")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cutText cuts a string from a header as JSONCut does.
func cutText(s string, max int) string {
	v, _ := gguf.StringValue(s).JSONCut(0, max)
	return v.(string)
}

// shortValue prints a value with a long string cut: the text output is for
// a person, and a header may hold a string of hundreds of megabytes.
func shortValue(v gguf.Value) string {
	if str, ok := v.AsString(); ok && len(str) > textStringLimit {
		return strconv.Quote(cutText(str, textStringLimit))
	}
	return v.String()
}
