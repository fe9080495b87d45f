package engine

import "testing"

// An embedding or reranking server is proven by what it serves: it
// evaluates no completion.
func TestProof(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		proof, path string
	}{
		{[]string{"-c", "4096"}, "completion", "/completion"},
		{[]string{"-c", "512", "--embedding"}, "embedding", "/v1/embeddings"},
		{[]string{"--embeddings", "--pooling", "mean"}, "embedding", "/v1/embeddings"},
		{[]string{"--rerank"}, "rerank", "/v1/rerank"},
		{[]string{"--reranking", "--embedding"}, "rerank", "/v1/rerank"},
		// a flag's value is no flag
		{[]string{"--alias", "embedding"}, "completion", "/completion"},
	} {
		if got := Proof(tc.args); got != tc.proof {
			t.Errorf("Proof(%q) = %q, want %q", tc.args, got, tc.proof)
		}
		if path, body, field := probe(tc.args); path != tc.path || len(body) == 0 || field == "" {
			t.Errorf("probe(%q) = %q %q %q, want %s with a body and a field", tc.args, path, body, field, tc.path)
		}
	}
}
