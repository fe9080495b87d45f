package cli

import (
	"fmt"
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
	switch {
	case n >= 1e12:
		return fmt.Sprintf("%.2f TB", float64(n)/1e12)
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.2f kB", float64(n)/1e3)
	}
	return strconv.FormatInt(n, 10) + " B"
}

// count formats a parameter count: 70.55 B, 494.03 M.
func count(n uint64) string {
	switch {
	case n >= 1e12:
		return fmt.Sprintf("%.2f T", float64(n)/1e12)
	case n >= 1e9:
		return fmt.Sprintf("%.2f B", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2f M", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.2f K", float64(n)/1e3)
	}
	return strconv.FormatUint(n, 10)
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
const maxSlots = 256

// errorRange writes a signed error range: "-12%..+7%".
func errorRange(lo, hi float64) string { return fmt.Sprintf("%+.0f%%..%+.0f%%", lo, hi) }
