package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

// The lines are llama-quantize's own, from a --dry-run of qwen2.5-0.5b.
func TestParseDryRun(t *testing.T) {
	const good = `llama_model_loader: loaded meta data with 30 key-value pairs
warning: blk.0.attn_k.weight                  - ncols    896 not divisible by 256 (required for type    q4_K) -> falling back to    q5_0
[   1/   3] output_norm.weight                   - [   896,      1,      1,      1], type =    f32, size =    0.003 MiB
[   2/   3] token_embd.weight                    - [   896, 151936,      1,      1], type =    f16, size =   259.66 MiB ->   137.94 MiB (q8_0)
[   3/   3] blk.0.attn_k.weight                  - [   896,    128,      1,      1], type =    f16, size =     0.22 MiB ->     0.08 MiB (q5_0)
llama_model_quantize_impl: model size  =   950.81 MiB (16.00 BPW)
`
	tests := []struct {
		name    string
		log     string
		want    []tensorType
		wantErr string
	}{
		{"every line", good, []tensorType{
			{"output_norm.weight", gguf.TypeF32},
			{"token_embd.weight", gguf.TypeQ8_0},
			{"blk.0.attn_k.weight", gguf.TypeQ5_0},
		}, ""},
		{"a line missing", strings.Replace(good, "[   2/   3]", "[   x/   3]", 1), nil, "out of sequence"},
		{"cut short", good[:strings.Index(good, "[   3/")], nil, "2 tensor lines of 3"},
		{"no lines", "llama_model_quantize_impl: failed\n", nil, "0 tensor lines"},
		{"unknown type", strings.Replace(good, "(q5_0)", "(q9_9)", 1), nil, `unknown type "q9_9"`},
	}
	for _, tc := range tests {
		got, err := parseDryRun([]byte(tc.log))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestCompare(t *testing.T) {
	var r result
	r.compare([]tensorType{
		{"a.weight", gguf.TypeQ4_K},
		{"b.weight", gguf.TypeQ6_K},
		{"only.quantizer", gguf.TypeF32},
	}, []gguf.TensorInfo{
		{Name: "a.weight", Type: gguf.TypeQ4_K},
		{Name: "b.weight", Type: gguf.TypeQ5_K},
		{Name: "only.synth", Type: gguf.TypeF16},
	})
	want := []mismatch{
		{"b.weight", "Q6_K", "Q5_K"},
		{"only.quantizer", "F32", "-"},
		{"only.synth", "-", "F16"},
	}
	if r.Tensors != 4 || r.Equal != 1 || !slices.Equal(r.Diffs, want) {
		t.Errorf("got %d/%d %v, want 1/4 %v", r.Equal, r.Tensors, r.Diffs, want)
	}
}

func TestGoldenLines(t *testing.T) {
	got := goldenLines([]tensorType{
		{"token_embd.weight", gguf.TypeQ6_K},
		{"blk.0.attn_v.weight", gguf.TypeQ6_K},
		{"blk.1.attn_v.weight", gguf.TypeQ6_K},
		{"blk.10.attn_v.weight", gguf.TypeQ6_K},
		{"blk.2.attn_v.weight", gguf.TypeQ4_K},
		{"blk.3.attn_v.weight", gguf.TypeQ4_K},
		// Layer 4 has no attn_v (a hybrid's recurrent layer): the run
		// must not bridge the gap.
		{"blk.5.attn_v.weight", gguf.TypeQ4_K},
		{"blk.4.ssm_in.weight", gguf.TypeQ4_K},
	})
	want := []string{
		"blk.*.attn_v.weight 0-1:Q6_K 2-3:Q4_K 5:Q4_K 10:Q6_K",
		"blk.*.ssm_in.weight 4:Q4_K",
		"token_embd.weight Q6_K",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
