package llamaflags

import "testing"

// BenchmarkFor is what a command line, an API request or a projection
// pays for the newest build's table: read once per process, then shared.
func BenchmarkFor(b *testing.B) {
	for b.Loop() {
		if _, err := For(""); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse is the cost of reading one build's tables from their
// --help texts, paid once per process.
func BenchmarkParse(b *testing.B) {
	for b.Loop() {
		if _, err := parse("80fb11a"); err != nil {
			b.Fatal(err)
		}
	}
}
