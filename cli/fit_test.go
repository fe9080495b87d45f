package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/gguf"
)

type fitOut struct {
	Artifact struct {
		Ref          string `json:"ref"`
		Architecture string `json:"architecture"`
		SizeBytes    int64  `json:"size_bytes"`
		Files        []any  `json:"files"`
	} `json:"artifact"`
	Profile  map[string]any `json:"profile"`
	Verdict  string         `json:"verdict"`
	Reason   string         `json:"reason"`
	Limiting *string        `json:"limiting"`
	Domains  []struct {
		ID        string   `json:"id"`
		Kind      string   `json:"kind"`
		Views     []string `json:"views"`
		Model     int64    `json:"model"`
		Context   int64    `json:"context"`
		Compute   int64    `json:"compute"`
		Auxiliary int64    `json:"auxiliary"`
		Serving   int64    `json:"serving"`
		Required  int64    `json:"required"`
		Available int64    `json:"available"`
		Margin    int64    `json:"margin"`
	} `json:"domains"`
	Buffers []struct {
		Device     string `json:"device"`
		BufferType string `json:"buffer_type"`
		Kind       string `json:"kind"`
		Bytes      int64  `json:"bytes"`
		Resident   int64  `json:"resident_bytes"`
	} `json:"buffers"`
	Serving []struct {
		Kind  string `json:"kind"`
		Bytes int64  `json:"bytes"`
	} `json:"serving"`
	Fixes []struct {
		Flags []string `json:"flags"`
		Says  string   `json:"says"`
	} `json:"fixes"`
}

func fitJSONOf(t *testing.T, args ...string) fitOut {
	t.Helper()
	code, out, errs := run(t, append([]string{"fit", "--quiet", "--json"}, args...)...)
	var f fitOut
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		t.Fatalf("exit %d, not JSON: %v\n%s\n%s", code, err, out, errs)
	}
	// 0 fits; 1 does not fit or is incompatible, the verdict printed.
	if want := map[bool]int{true: exitOK, false: exitError}[f.Verdict == "fits"]; code != want {
		t.Fatalf("verdict %s, exit %d, want %d: %s", f.Verdict, code, want, errs)
	}
	return f
}

func TestFitContract(t *testing.T) {
	path := synthFile(t, "tinyllama-1.1b")
	f := fitJSONOf(t, path, "-c", "4096", "-np", "1", "-fa", "off", "-b", "512", "--machine", "cpu-32")
	if f.Verdict != "fits" || f.Limiting == nil || *f.Limiting != "ram" || f.Artifact.Architecture != "llama" {
		t.Fatalf("verdict %q limiting %v arch %q: %s", f.Verdict, f.Limiting, f.Artifact.Architecture, f.Reason)
	}
	for _, key := range []string{"ctx", "parallel", "kv_unified", "batch", "ubatch", "cache_type_k", "cache_type_v", "flash_attn", "gpu_layers", "tensor_split", "overrides", "mmap"} {
		if _, ok := f.Profile[key]; !ok {
			t.Errorf("profile lacks %q", key)
		}
	}
	// The buffers are the ones llama.cpp logged for this file and profile
	// (see plan's TestTinyLlamaCPU); the domain adds up by kind what
	// stays resident of them: of the mapped file, the 181 MiB used in
	// place.
	var total int64
	kinds := map[string]bool{}
	for _, b := range f.Buffers {
		if b.Resident > 0 {
			total += b.Resident
		} else {
			total += b.Bytes
		}
		kinds[b.BufferType+"/"+b.Kind] = true
		if b.BufferType == "CPU_Mapped" && b.Resident>>20 != 181 {
			t.Errorf("CPU_Mapped keeps %d MiB resident, want 181", b.Resident>>20)
		}
	}
	for _, want := range []string{"CPU_Mapped/model", "CPU_REPACK/model", "CPU/kv", "CPU/output", "CPU/compute"} {
		if !kinds[want] {
			t.Errorf("no %s buffer in %v", want, kinds)
		}
	}
	d := f.Domains[0]
	for _, b := range f.Serving {
		total += b.Bytes
	}
	if d.Required != total || d.Model+d.Context+d.Compute+d.Auxiliary+d.Serving != d.Required || d.Margin != d.Available-d.Required {
		t.Errorf("domain %+v does not add up to buffers totalling %d", d, total)
	}
	if d.Context != 88<<20 {
		t.Errorf("context %d, llama.cpp allocates 88 MiB of KV", d.Context)
	}
}

func TestFitDoesNotFit(t *testing.T) {
	path := synthFile(t, "llama-3.1-70b")
	f := fitJSONOf(t, path, "-c", "8192", "-np", "1", "--machine", "rtx-4090", "-ngl", "all")
	if f.Verdict != "does_not_fit" || f.Limiting == nil || *f.Limiting != "gpu0" {
		t.Fatalf("verdict %q limiting %v: %s", f.Verdict, f.Limiting, f.Reason)
	}
	if !strings.Contains(f.Reason, "gpu0 needs") || !strings.Contains(f.Reason, "short by") {
		t.Errorf("reason %q", f.Reason)
	}
	found := false
	for _, fix := range f.Fixes {
		if len(fix.Flags) == 2 && fix.Flags[0] == "-ngl" {
			found = true
		}
	}
	if !found {
		t.Errorf("no -ngl fix in %v", f.Fixes)
	}
}

func TestFitIncompatible(t *testing.T) {
	b := gguf.NewBuilder()
	b.Set("general.architecture", gguf.StringValue("futurenet"))
	if err := b.AddTensor("w", gguf.TypeF32, []uint64{32}, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "f.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f := fitJSONOf(t, path, "--machine", "cpu-32")
	if f.Verdict != "incompatible" || !strings.Contains(f.Reason, `"futurenet"`) || f.Limiting != nil {
		t.Errorf("verdict %q, reason %q", f.Verdict, f.Reason)
	}
}

func TestFitFlags(t *testing.T) {
	path := synthFile(t, "tinyllama-1.1b")
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"-ot", "exps"}, "want PATTERN=BUFFER_TYPE"},
		{[]string{"-ot", "exps(=CPU"}, "not a regular expression"},
		{[]string{"-ot", "exps=CUDA7"}, `no device has buffer type "CUDA7"`},
		{[]string{"--n-cpu-moe", "-3"}, "-ncmoe, --n-cpu-moe -3: want 0 or more layers"},
		{[]string{"-fa", "maybe"}, `-fa, --flash-attn "maybe": want on, off or auto`},
		{[]string{"-ngl", "lots"}, "want a number of layers"},
		{[]string{"-ctk", "q9"}, `-ctk, --cache-type-k "q9": want one of f32, f16`},
		{[]string{"-ctv", "q8_0", "-fa", "off"}, "needs flash attention"},
		{[]string{"--machine", "no-such-box"}, "no-such-box"},
		// llama.cpp's own fit would rewrite -c and -ngl at load.
		{[]string{"--fit", "on"}, "only --fit off is modeled"},
	} {
		code, _, errs := run(t, append([]string{"fit", "--quiet", path}, tc.args...)...)
		if code == 0 || !strings.Contains(errs, tc.err) {
			t.Errorf("%v: exit %d, %q", tc.args, code, errs)
		}
	}
	// What plan prints (--fit off, --swa-full) fit takes back.
	if code, _, errs := run(t, "fit", "--quiet", path, "--machine", "cpu-32", "-c", "2048", "-np", "1", "-ngl", "0", "--fit", "off", "--swa-full"); code != 0 {
		t.Errorf("plan's own flags: exit %d, %s", code, errs)
	}
	// --n-cpu-moe moves routed experts to system memory: on a MoE model
	// the GPU carries less and the mapped file more.
	moe := synthFile(t, "qwen3-30b-a3b")
	gpuOf := func(args ...string) (gpu, ram int64) {
		code, out, errs := run(t, append([]string{"fit", "--quiet", "--json", moe, "-c", "4096", "-np", "1", "-ngl", "all", "--machine", "rtx-4090"}, args...)...)
		if code != 0 {
			t.Fatalf("fit %v: exit %d %s", args, code, errs)
		}
		var f struct {
			Domains []struct {
				ID    string `json:"id"`
				Model int64  `json:"model"`
			} `json:"domains"`
		}
		if err := json.Unmarshal([]byte(out), &f); err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Domains {
			if d.ID == "gpu0" {
				gpu = d.Model
			} else {
				ram = d.Model
			}
		}
		return gpu, ram
	}
	g0, r0 := gpuOf()
	g20, r20 := gpuOf("--n-cpu-moe", "20")
	gAll, _ := gpuOf("--cpu-moe")
	if !(g20 < g0 && r20 > r0 && gAll < g20) {
		t.Errorf("GPU model bytes: %d without, %d with --n-cpu-moe 20, %d with --cpu-moe; RAM %d -> %d", g0, g20, gAll, r0, r20)
	}
	// -ot with the pattern llama.cpp's --n-cpu-moe 20 adds places the same
	// bytes; one that keeps the experts of layer 0 on the GPU comes first
	// and wins over the general one that follows.
	if g, r := gpuOf("-ot", `blk\.([0-9]|1[0-9])\.ffn_(up|down|gate)_exps=CPU`); g != g20 || r != r20 {
		t.Errorf("-ot like --n-cpu-moe 20: GPU %d RAM %d, want %d %d", g, r, g20, r20)
	}
	if g, _ := gpuOf("-ot", `blk\.0\.ffn_.*_exps=CUDA0`, "-ot", `blk\.([0-9]|1[0-9])\.ffn_(up|down|gate)_exps=CPU`); g <= g20 {
		t.Errorf("layer 0's experts kept on the GPU by the first override: GPU %d, want more than %d", g, g20)
	}
	code, out, _ := run(t, "fit", "--quiet", path, "-c", "2048", "-np", "1", "--machine", "m4-16")
	if code != 0 || !strings.Contains(out, "unified") || !strings.Contains(out, "MTL0") {
		t.Errorf("Mac preset: exit %d\n%s", code, out)
	}
}

func TestPlanCommand(t *testing.T) {
	path := synthFile(t, "llama-3.1-8b")
	code, out, errs := run(t, "plan", "--quiet", "--machine", "rtx-4090", "--print-args", path)
	if code != 0 || strings.TrimSpace(out) != "-c 262144 -np 2 -ngl 33 --fit off -fa on -ctk q8_0 -ctv q8_0" {
		t.Errorf("exit %d, %q %s", code, out, errs)
	}
	code, out, _ = run(t, "plan", "--quiet", "--machine", "rtx-4090", "--no-q8", "--parallel", "1", "--json", path)
	var p struct {
		Chosen struct {
			Flags      []string `json:"flags"`
			CtxPerSlot int      `json:"ctx_per_slot"`
		} `json:"chosen"`
		Explain []string `json:"explain"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil || code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	if len(p.Chosen.Flags) == 0 || p.Chosen.Flags[0] != "-c" || len(p.Explain) == 0 {
		t.Errorf("plan %+v", p)
	}
	code, out, _ = run(t, "plan", "--quiet", "--machine", "rtx-4090", path)
	if code != 0 || !strings.Contains(out, "decode about ") || !strings.Contains(out, "llama-server -m ") {
		t.Errorf("human plan output:\n%s", out)
	}
	if code, _, errs := run(t, "plan", "--quiet", "--goal", "fastest", path); code != 2 || !strings.Contains(errs, `--goal "fastest": want`) {
		t.Errorf("bad goal: exit %d %s", code, errs)
	}

	// What the user sets is kept; the rest is searched.
	code, out, errs = run(t, "plan", "--quiet", "--machine", "rtx-4090", "--print-args", "-ngl", "20", "-c", "8192", "-ctk", "q8_0", path)
	if code != 0 || strings.TrimSpace(out) != "-c 8192 -np 2 -ngl 20 --fit off -ctk q8_0 -cram 785" {
		t.Errorf("fixed settings: exit %d, %q %s", code, out, errs)
	}
	if code, _, errs := run(t, "plan", "--quiet", "-c", "-5", path); code != 2 || !strings.Contains(errs, "-c, --ctx-size -5: want 0") {
		t.Errorf("negative -c: exit %d %s", code, errs)
	}

	// A desktop session holds 2415 MiB of this 4090: the plan says so and
	// what headless would allow; --headless plans for it.
	desktop := filepath.Join("..", "hw", "testdata", "probe", "rtx4090-desktop", "want.json")
	code, out, errs = run(t, "plan", "--quiet", "--machine", desktop, path)
	if code != 0 || !strings.Contains(out, "a desktop session holds 2415 MiB of GPU memory") {
		t.Errorf("desktop plan: exit %d %s\n%s", code, errs, out)
	}
	code, out, errs = run(t, "plan", "--quiet", "--machine", desktop, "--headless", path)
	if code != 0 || strings.Contains(out, "desktop session") {
		t.Errorf("--headless plan: exit %d %s\n%s", code, errs, out)
	}
}
