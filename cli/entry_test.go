package cli

import (
	"regexp"
	"strings"
	"testing"
)

// An entry alone plans its recommended quant and says which in one line;
// where none fits, its smallest; a near miss names the entry meant.
func TestEntryAlone(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		code    int
		said    string // the line on standard error
		planned string // the variant the output is about
	}{
		{[]string{"fit", "llama-3.2-1b-instruct", "--machine", "cpu-32"}, 0,
			`^llama-3\.2-1b-instruct: planning llama-3\.2-1b-instruct/(\S+), the quant recommend ranks first here \(of [^)]+\)\n`, "llama-3.2-1b-instruct/"},
		{[]string{"plan", "llama-3.3-70b-instruct", "--machine", "m4-16"}, 1,
			`^llama-3\.3-70b-instruct: planning llama-3\.3-70b-instruct/(Q4_K_M), the smallest: none of its quants fits here \(of Q4_K_M, Q5_K_M, Q6_K, Q8_0\)\n`, ""},
		{[]string{"plan", "llama-3.2-1b-instruc", "--machine", "cpu-32"}, 2,
			`did you mean llama-3\.2-1b-instruct\?`, ""},
	} {
		t.Run(strings.Join(tc.args[:2], " "), func(t *testing.T) {
			code, out, errs := run(t, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s%s", code, tc.code, out, errs)
			}
			m := regexp.MustCompile(tc.said).FindStringSubmatch(errs)
			if m == nil {
				t.Fatalf("standard error does not match %s:\n%s", tc.said, errs)
			}
			if tc.planned != "" && !strings.Contains(out, tc.planned+m[1]+" ") {
				t.Errorf("the output is not about %s%s:\n%s", tc.planned, m[1], out)
			}
		})
	}
}
