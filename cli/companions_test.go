package cli

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
	"github.com/headroom-llm/headroom/synth"
)

func projectorFile(t *testing.T) string {
	t.Helper()
	b, err := synth.Projector(synth.SigLIP896, gguf.TypeF16)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mmproj.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// projectorOfType is Gemma 3's projector file with another
// clip.projector_type, for the flags that depend on the type.
func projectorOfType(t *testing.T, typ string) string {
	t.Helper()
	b, err := synth.Projector(synth.SigLIP896, gguf.TypeF16)
	if err != nil {
		t.Fatal(err)
	}
	b.Set("clip.projector_type", gguf.StringValue(typ))
	path := filepath.Join(t.TempDir(), "mmproj-"+typ+".gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFitCountsCompanions(t *testing.T) {
	model := synthFile(t, "llama-3.1-8b")
	draft := synthFile(t, "llama-3.2-1b")
	proj := projectorFile(t)
	sum := func(f fitOut) (aux int64) {
		for _, d := range f.Domains {
			aux += d.Auxiliary
		}
		return aux
	}
	bare := fitJSONOf(t, "--machine", "rtx-4090", "-c", "8192", "-np", "1", model)
	with := fitJSONOf(t, "--machine", "rtx-4090", "-c", "8192", "-np", "1", "--mmproj", proj, "-md", draft, model)
	if sum(with) <= sum(bare) {
		t.Errorf("auxiliary %d with a projector and a draft, %d without", sum(with), sum(bare))
	}
	var raw struct {
		Buffers []struct {
			Model string `json:"model"`
			Kind  string `json:"kind"`
		} `json:"buffers"`
		Profile struct {
			Companions struct {
				Projector string `json:"projector"`
				Draft     string `json:"draft"`
			} `json:"companions"`
		} `json:"profile"`
	}
	_, out, _ := run(t, "fit", "--quiet", "--json", "--machine", "rtx-4090", "-c", "8192", "-np", "1", "--mmproj", proj, "-md", draft, model)
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatal(err)
	}
	owners := map[string]bool{}
	for _, b := range raw.Buffers {
		owners[b.Model] = true
	}
	if !owners["projector"] || !owners["draft"] || !owners[""] {
		t.Errorf("buffers belong to %v, want the model, the projector and the draft", owners)
	}
	if raw.Profile.Companions.Projector != proj || raw.Profile.Companions.Draft != draft {
		t.Errorf("profile companions %+v", raw.Profile.Companions)
	}
	code, human, _ := run(t, "fit", "--quiet", "--machine", "rtx-4090", "--mmproj", proj, model)
	if code != 0 || !strings.Contains(human, "projector model") || !strings.Contains(human, "rough estimate") {
		t.Errorf("human fit output does not show the projector's buffers:\n%s", human)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--no-mmproj-offload"}, "need --mmproj"},
		{[]string{"--image-max-tokens", "256"}, "need --mmproj"},
		{[]string{"--mmproj", proj, "--image-min-tokens", "512", "--image-max-tokens", "256"}, "the least no more than the most"},
		{[]string{"--mmproj", projectorOfType(t, "lfm2"), "--image-max-tokens", "256"}, `"lfm2" projector`},
		{[]string{"-ngld", "4"}, "needs -md"},
		{[]string{"--mmproj", draft}, `expected "clip"`},
		{[]string{"-md", proj}, "not one headroom models"},
		{[]string{"-md", filepath.Join(t.TempDir(), "missing.gguf")}, "-md "},
	} {
		code, _, errs := run(t, append([]string{"fit", "--quiet", "--machine", "rtx-4090"}, append(c.args, model)...)...)
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %s; want an error saying %q", c.args, code, errs, c.want)
		}
	}
}

func TestPlanWithCompanions(t *testing.T) {
	model := synthFile(t, "llama-3.1-8b")
	draft := synthFile(t, "llama-3.2-1b")
	proj := projectorFile(t)
	code, out, errs := run(t, "plan", "--quiet", "--machine", "rtx-5070", "--print-args", model)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	bare := strings.Fields(out)
	code, out, errs = run(t, "plan", "--quiet", "--machine", "rtx-5070", "--print-args", "--mmproj", proj, "-md", draft, "-ngld", "all",
		"--image-min-tokens", "64", "--image-max-tokens", "256", model)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	flags := strings.Fields(out)
	for _, f := range [][]string{{"--mmproj", proj}, {"-md", draft}, {"--image-min-tokens", "64"}, {"--image-max-tokens", "256"}} {
		i := slices.Index(flags, f[0])
		if i < 0 || i+1 >= len(flags) || flags[i+1] != f[1] {
			t.Errorf("flags %v lack %v", flags, f)
		}
	}
	if slices.Equal(flags[:4], bare[:4]) {
		t.Errorf("the same context and slots with a draft and a projector as without: %v", flags)
	}
}

// TestDraftVocabulary: a draft llama.cpp would refuse for its vocabulary
// is refused before any plan is made; one of the target's family is not.
func TestDraftVocabulary(t *testing.T) {
	target := synthFile(t, "qwen3-0.6b")
	for _, tt := range []struct {
		draft string
		code  int
		want  string
	}{
		{synthFile(t, "qwen3-8b"), 0, ""},
		{synthFile(t, "tinyllama-1.1b"), 1, "llama.cpp refuses this draft"},
	} {
		code, _, errs := run(t, "fit", target, "-md", tt.draft, "--machine", "cpu-32", "-c", "4096", "--quiet")
		if code != tt.code || !strings.Contains(errs, tt.want) {
			t.Errorf("-md %s: exit %d, want %d; stderr %q lacks %q", tt.draft, code, tt.code, errs, tt.want)
		}
	}
}
