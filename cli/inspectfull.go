package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/source"
)

// printFullJSON writes what printJSON(w, inspectReport(h, -1, -1)) writes,
// byte for byte, without building it: strings in 64 KiB pieces, arrays an
// element at a time, so that a header's 250 MiB string or array costs a
// buffer, not gigabytes (7.45 GB and 10.4 GB before), and ctx ending
// (Ctrl-C) stops it between pieces.
func printFullJSON(ctx context.Context, w io.Writer, h *source.Header) error {
	m := h.Model
	// The report with every value cut to nothing: what is small is taken
	// from it, what may be large is streamed from the header.
	r := inspectReport(h, 0, 0)
	o := &jsonOut{ctx: ctx, w: bufio.NewWriterSize(w, 64<<10)}
	o.raw("{\n")
	o.field("  ", "artifact", r.Artifact, true)
	o.raw(`  "architecture": `)
	o.str(m.Architecture())
	if name, _ := m.Str("general.name"); name != "" {
		o.raw(",\n  \"name\": ")
		o.str(name)
	}
	o.raw(",\n")
	if r.FileType != "" {
		o.field("  ", "file_type", r.FileType, true)
	}
	o.field("  ", "parameters", r.Parameters, true)
	o.field("  ", "size_bytes", r.SizeBytes, true)
	o.field("  ", "tensor_bytes", r.TensorBytes, true)
	o.field("  ", "header_bytes", r.HeaderBytes, true)
	o.field("  ", "bits_per_weight", r.BitsPerWt, true)
	o.field("  ", "gguf_version", r.GGUFVersion, true)
	o.field("  ", "alignment", r.Alignment, true)
	o.field("  ", "tensor_count", r.TensorCount, true)
	o.field("  ", "types", r.Types, true)
	o.raw(`  "metadata": `)
	if len(m.Files[0].Metadata) == 0 {
		o.raw("[]")
	} else {
		o.raw("[")
		for i, kv := range m.Files[0].Metadata {
			if i > 0 {
				o.raw(",")
			}
			o.raw("\n    {\n      \"key\": ")
			o.str(kv.Key)
			o.raw(",\n")
			o.field("      ", "type", r.Metadata[i].Type, true)
			if a, ok := kv.Value.AsArray(); ok {
				o.field("      ", "len", a.Len(), true)
			}
			o.raw(`      "value": `)
			o.value("      ", kv.Value)
			o.raw("\n    }")
		}
		o.raw("\n  ]")
	}
	o.raw(",\n")
	o.field("  ", "tensors", r.Tensors, true)
	o.field("  ", "fetch", r.Fetch, false)
	o.raw("}\n")
	if o.err != nil {
		return o.err
	}
	return o.w.Flush()
}

// jsonOut writes JSON as encoding/json's indenting Encoder would, piece by
// piece; the first error, the context's included, sticks.
type jsonOut struct {
	ctx context.Context
	w   *bufio.Writer
	err error
	n   int    // pieces since the context was last checked
	buf []byte // a string's escaped bytes, reused
}

func (o *jsonOut) raw(s string) {
	if o.err == nil {
		_, o.err = o.w.WriteString(s)
	}
}

func (o *jsonOut) bytes(b []byte) {
	if o.err == nil {
		_, o.err = o.w.Write(b)
	}
}

// check stops the output once the context ends, looking at it every few
// thousand pieces.
func (o *jsonOut) check() {
	if o.n++; o.n%4096 != 0 || o.err != nil {
		return
	}
	if err := context.Cause(o.ctx); err != nil {
		o.err = fmt.Errorf("stopped printing: %w", err)
	}
}

// field writes `indent"name": v` with v marshalled at that indent, and a
// comma when more follows.
func (o *jsonOut) field(indent, name string, v any, more bool) {
	b, err := json.MarshalIndent(v, indent, "  ")
	if err != nil && o.err == nil {
		o.err = err
	}
	o.raw(indent + strconv.Quote(name) + ": ")
	o.bytes(b)
	if more {
		o.raw(",")
	}
	o.raw("\n")
}

// strPiece is how much of a string is escaped between looks at the
// context.
const strPiece = 64 << 10

// str writes s as a JSON string escaped as encoding/json escapes it (HTML
// characters, invalid UTF-8 as U+FFFD, U+2028 and U+2029), through a
// reused buffer rather than a copy of the whole.
func (o *jsonOut) str(s string) {
	o.buf = append(o.buf[:0], '"')
	for i := 0; i < len(s) && o.err == nil; {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c >= ' ' && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&':
				o.buf = append(o.buf, c)
			case c == '"' || c == '\\':
				o.buf = append(o.buf, '\\', c)
			case c == '\n':
				o.buf = append(o.buf, '\\', 'n')
			case c == '\r':
				o.buf = append(o.buf, '\\', 'r')
			case c == '\t':
				o.buf = append(o.buf, '\\', 't')
			case c == '\b':
				o.buf = append(o.buf, '\\', 'b')
			case c == '\f':
				o.buf = append(o.buf, '\\', 'f')
			default:
				o.buf = append(o.buf, '\\', 'u', '0', '0', hexDigit[c>>4], hexDigit[c&0xf])
			}
			i++
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				o.buf = append(o.buf, `\ufffd`...)
			case r == '\u2028' || r == '\u2029':
				o.buf = append(o.buf, `\u202`...)
				o.buf = append(o.buf, hexDigit[r&0xf])
			default:
				o.buf = append(o.buf, s[i:i+size]...)
			}
			i += size
		}
		if len(o.buf) >= strPiece {
			o.bytes(o.buf)
			o.buf = o.buf[:0]
			o.n += 4095
			o.check()
		}
	}
	o.buf = append(o.buf, '"')
	o.bytes(o.buf)
}

const hexDigit = "0123456789abcdef"

// value writes a metadata value whose line starts at indent.
func (o *jsonOut) value(indent string, v gguf.Value) {
	if s, ok := v.AsString(); ok {
		o.str(s)
		return
	}
	a, ok := v.AsArray()
	if !ok {
		x, _ := v.JSONCut(-1, -1)
		b, err := json.Marshal(x)
		if err != nil && o.err == nil {
			o.err = err
		}
		o.bytes(b)
		return
	}
	if a.Len() == 0 {
		o.raw("[]")
		return
	}
	inner := indent + "  "
	first, next := "\n"+inner, ",\n"+inner
	var num []byte
	o.raw("[")
	for i := 0; i < a.Len() && o.err == nil; i++ {
		if i == 0 {
			o.raw(first)
		} else {
			o.raw(next)
		}
		e := a.Index(i)
		switch e.Type() {
		case gguf.Int8, gguf.Int16, gguf.Int32, gguf.Int64:
			x, _ := e.AsInt()
			num = strconv.AppendInt(num[:0], x, 10)
			o.bytes(num)
		case gguf.Uint8, gguf.Uint16, gguf.Uint32, gguf.Uint64:
			x, _ := e.AsUint()
			num = strconv.AppendUint(num[:0], x, 10)
			o.bytes(num)
		case gguf.Bool:
			x, _ := e.AsBool()
			o.raw(strconv.FormatBool(x))
		default:
			o.value(inner, e)
		}
		o.check()
	}
	o.raw("\n" + indent + "]")
}
