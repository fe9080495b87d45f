package cli

import (
	"encoding/json"
	"fmt"
	"github.com/headroom-llm/headroom/request"
	"io"
	"strconv"
)

// bytesIEC formats a byte count the way llama.cpp's logs do, in binary units.
func bytesIEC(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	v := float64(n) / unit
	i := 0
	for v >= unit && i < len(units)-1 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.2f %s", v, units[i])
}

// bytesSI formats a byte count in decimal units, as model hubs list files.
func bytesSI(n int64) string {
	return decimal(float64(n), " TB", " GB", " MB", " kB", " B")
}

// count formats a parameter count: 70.55 B, 494.03 M.
func count(n uint64) string {
	return decimal(float64(n), " T", " B", " M", " K", "")
}

// decimal writes v with two decimals in the largest of the steps 1e12,
// 1e9, 1e6 and 1e3 it reaches, each with its suffix, and below them as a
// whole number with the last suffix.
func decimal(v float64, tera, giga, mega, kilo, one string) string {
	for _, step := range []struct {
		at     float64
		suffix string
	}{{1e12, tera}, {1e9, giga}, {1e6, mega}, {1e3, kilo}} {
		if v >= step.at {
			return fmt.Sprintf("%.2f%s", v/step.at, step.suffix)
		}
	}
	return strconv.FormatFloat(v, 'f', 0, 64) + one
}

// plural says n things in English: "1 slot", "2 slots".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// maxSlots is the most slots a command line may ask for, as the API
// allows: llama-server takes more, but no plan for them would fit.
const maxSlots = request.MaxSlots

// errorRange writes a signed error range: "-12%..+7%".
func errorRange(lo, hi float64) string { return fmt.Sprintf("%+.0f%%..%+.0f%%", lo, hi) }

// printJSON writes v as indented JSON, as every --json output is.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
