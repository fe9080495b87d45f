package cli

import (
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/synth"
)

// fit of llama-server's default command counts its 8 GiB prompt cache;
// -cram 0 takes it out; a pasted command's -cram and -ctxcp are counted
// and kept, --cache-reuse is accepted as changing nothing; a command that
// loads but does not fit while serving says so and offers the -cram that
// fits; a program that keeps no prompt cache refuses -cram.
func TestFitCountsServing(t *testing.T) {
	path := writeShape(t, t.TempDir(), "qwen3-0.6b", synth.Q8_0)
	cacheOf := func(f fitOut) int64 {
		for _, b := range f.Serving {
			if b.Kind == "prompt_cache" {
				return b.Bytes
			}
		}
		return 0
	}
	f := fitJSONOf(t, "--machine", "cpu-32", path, "-c", "8192", "-np", "1")
	if cacheOf(f) != 8192<<20 || f.Domains[0].Serving < 8192<<20 {
		t.Errorf("default command: prompt cache %d, domain serving %d; want llama-server's 8 GiB", cacheOf(f), f.Domains[0].Serving)
	}
	if f := fitJSONOf(t, "--machine", "cpu-32", path, "-c", "8192", "-np", "1", "-cram", "0"); cacheOf(f) != 0 {
		t.Errorf("-cram 0: prompt cache %d", cacheOf(f))
	}
	code, out, errs := run(t, "fit", "--machine", "cpu-32", "--", "llama-server", "-m", path, "-c", "8192", "-np", "1", "-cram", "2048", "--ctx-checkpoints", "8", "--cache-reuse", "256")
	if code != 0 || !strings.Contains(out, "-cram 2048 -ctxcp 8") || !strings.Contains(errs, "--cache-reuse 256") {
		t.Errorf("pasted: exit %d\n%s\n%s", code, out, errs)
	}
	// 6 slots of 40960 cells: 26.3 GiB of KV loads in 32 GiB; with the
	// prompt cache's 8 GiB it does not serve.
	code, out, _ = run(t, "fit", "--machine", "cpu-32", path, "-c", "245760", "-np", "6")
	if code != 1 || !strings.Contains(out, "does not fit while serving") || !strings.Contains(out, "prompt cache") || !strings.Contains(out, "-cram ") {
		t.Errorf("fits at load only: exit %d\n%s", code, out)
	}
	if code, _, errs := run(t, "fit", "--machine", "cpu-32", path, "--program", "llama-completion", "-cram", "100"); code != 2 || !strings.Contains(errs, "keeps no prompt cache") {
		t.Errorf("-cram for llama-completion: exit %d %s", code, errs)
	}
	if code, _, errs := run(t, "fit", "--machine", "cpu-32", path, "-cram", "-2"); code != 2 || !strings.Contains(errs, "-cram -2") {
		t.Errorf("-cram -2: exit %d %s", code, errs)
	}
}
