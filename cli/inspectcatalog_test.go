package cli

import (
	"regexp"
	"strings"
	"testing"
)

// A catalog variant is inspected offline, from the header fit and plan
// read for it, whether the Hub is switched off (HF_HUB_OFFLINE=1) or
// cannot be reached (a name that does not resolve).
func TestInspectCatalogOffline(t *testing.T) {
	for _, tc := range []struct {
		name string
		vars map[string]string
	}{
		{"HF_HUB_OFFLINE", map[string]string{"HF_HUB_OFFLINE": "1"}},
		{"unresolvable", map[string]string{"HF_ENDPOINT": "http://huggingface.invalid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runEnv(t, tc.vars, "inspect", "llama-3.2-1b-instruct/Q4_K_M")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if !strings.Contains(errs, "offline") || !strings.Contains(errs, "derived from the public config") {
				t.Errorf("stderr does not say what was inspected: %s", errs)
			}
			if strings.Contains(errs, "retrying") {
				t.Errorf("the unreachable Hub was asked again: %s", errs)
			}
			for _, want := range []string{`(?m)^architecture +llama$`, `(?m)^source +llama-3\.2-1b-instruct/Q4_K_M$`, `(?m)^parameters +1\.24 B, Q4_K_M,`} {
				if !regexp.MustCompile(want).MatchString(out) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
	// Not a catalog variant: offline is an error that says so.
	code, _, errs := runEnv(t, map[string]string{"HF_HUB_OFFLINE": "1"}, "inspect", "hf:acme/none-GGUF:Q4_K_M")
	if code == 0 || !strings.Contains(errs, "HF_HUB_OFFLINE") {
		t.Errorf("exit %d: %s", code, errs)
	}
}
