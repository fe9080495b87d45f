package speed

// Measured is what llama.cpp's own llama-bench measured for a plan's
// flags on this machine: the answer the estimate is a guess at.
type Measured struct {
	// Tool is the llama-bench that ran, Build its build as it printed it.
	Tool  string `json:"tool"`
	Build string `json:"build"`
	// Args are the flags it ran with, without the model and output ones.
	Args []string `json:"args"`
	// Twin says what was measured: the model file, or a sparse twin of
	// its header whose weights read as zeros (ggml's kernels take as
	// long on zeros as on real weights).
	Twin string `json:"twin"`
	// Tests are the measurements, prompt processing and generation.
	Tests []BenchTest `json:"tests"`
	// Seconds is how long the whole measurement took.
	Seconds float64 `json:"seconds"`
	// Notes say what the time budget cut, and what llama-bench does not
	// measure of the plan (one sequence, no draft).
	Notes []string `json:"notes,omitempty"`
}

// BenchTest is one llama-bench test: Tokens of prompt processing ("pp")
// or generation ("tg") after Depth tokens already in the context.
type BenchTest struct {
	Kind        string    `json:"kind"`
	Tokens      int       `json:"tokens"`
	Depth       int       `json:"depth"`
	Repetitions int       `json:"repetitions"`
	MeanTPS     float64   `json:"mean_tokens_per_s"`
	StddevTPS   float64   `json:"stddev_tokens_per_s"`
	SamplesTPS  []float64 `json:"samples_tokens_per_s"`
}

// Test returns the first test of that kind at that depth, nil if none.
func (m *Measured) Test(kind string, depth int) *BenchTest {
	if m == nil {
		return nil
	}
	for i := range m.Tests {
		if t := &m.Tests[i]; t.Kind == kind && t.Depth == depth {
			return t
		}
	}
	return nil
}
