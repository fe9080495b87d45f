package llamaflags

import "testing"

// BenchmarkFor is the cost of reading the newest build's tables, which
// every command line and every llama-fit-params projection pays.
func BenchmarkFor(b *testing.B) {
	for b.Loop() {
		if _, err := For(""); err != nil {
			b.Fatal(err)
		}
	}
}
