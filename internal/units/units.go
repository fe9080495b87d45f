// Package units writes byte counts into sentences, in the binary units
// llama.cpp's logs use, so a figure headroom says reads like the one
// llama.cpp printed.
package units

import "fmt"

// GiB writes n bytes in GiB with two decimals: "7.50 GiB".
func GiB(n int64) string { return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30)) }

// Size writes n bytes in whole MiB below a GiB, where two decimals of a
// GiB would round a small figure away, and in GiB from there on.
func Size(n int64) string {
	if n < 1<<30 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return GiB(n)
}
