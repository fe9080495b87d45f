package suggest

import "testing"

func TestClosest(t *testing.T) {
	commands := []string{"recommend", "fit", "plan", "pull", "serve", "serve-api", "hw", "inspect", "synth", "version"}
	for _, tc := range []struct {
		word       string
		candidates []string
		want       string
	}{
		{"recomend", commands, "recommend"},
		{"reccomend", commands, "recommend"},
		{"paln", commands, "plan"},
		{"serv", commands, "serve"},
		{"fitt", commands, "fit"},
		{"download", commands, ""},
		{"x", commands, ""},
		{"", commands, ""},
		{"ctx", []string{"c", "ctx-size", "cache-type-k"}, "ctx-size"},
		{"rtx4090", []string{"cpu-32", "rtx-4090", "rtx-3090"}, "rtx-4090"},
		{"llama-3.2-1b-instruc", []string{"llama-3.2-3b-instruct", "llama-3.2-1b-instruct"}, "llama-3.2-1b-instruct"},
		{"QWEN3-8B", []string{"qwen3-8b", "qwen3-4b"}, "qwen3-8b"},
		{"gemma", []string{"llama"}, ""},
	} {
		if got := Closest(tc.word, tc.candidates); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
}

func FuzzDistance(f *testing.F) {
	f.Add("kitten", "sitting")
	f.Fuzz(func(t *testing.T, a, b string) {
		d := distance(a, b)
		if d != distance(b, a) || d < 0 || d > max(len([]rune(a)), len([]rune(b))) || (d == 0) != (string([]rune(a)) == string([]rune(b))) {
			t.Errorf("distance(%q, %q) = %d", a, b, d)
		}
	})
}
