package llamaflags

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestEveryFlagClassified holds the classification to the tables: every
// flag of every held build's programs is classified (Load fails on one
// that is not), and every classified key is a flag of some held build.
func TestEveryFlagClassified(t *testing.T) {
	if len(Builds()) == 0 {
		t.Fatal("no build's tables are embedded")
	}
	used := map[string]bool{}
	for _, b := range Builds() {
		tb, err := Load(b)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(tb.Entries()); n < 200 {
			t.Errorf("build %s: %d flags; llama-server alone has over 250", b, n)
		}
		for _, e := range tb.Entries() {
			used[e.Key()] = true
			if (e.Use == Refused || e.Use == Modeled) && e.Why == "" {
				t.Errorf("build %s: %s is %s with no reason", b, e.Key(), e.Use)
			}
		}
	}
	for k := range classes() {
		if !used[k] {
			t.Errorf("%s is classified but no held build has it", k)
		}
	}
}

// TestTableFacts checks the table against what arg.cpp says of a few
// flags: their programs, values and variables.
func TestTableFacts(t *testing.T) {
	tb, err := Load("80fb11a")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		typed    string
		key      string
		values   int
		env      string
		use      Use
		programs []Program
		not      []Program
	}{
		{"-c", "--ctx-size", 1, "LLAMA_ARG_CTX_SIZE", Modeled, []Program{Server, CLI, Completion, FitParams}, nil},
		{"-kvu", "--kv-unified", 0, "LLAMA_ARG_KV_UNIFIED", Modeled, []Program{Server}, []Program{FitParams, CLI, Completion}},
		{"--no-kv-unified", "--kv-unified", 0, "LLAMA_ARG_KV_UNIFIED", Modeled, []Program{Server}, nil},
		{"-cram", "--cache-ram", 1, "LLAMA_ARG_CACHE_RAM", Modeled, []Program{Server}, []Program{FitParams}},
		{"--api-key", "--api-key", 1, "LLAMA_API_KEY", PassThrough, []Program{Server}, []Program{FitParams}},
		{"--ctx-size", "--ctx-size", 1, "LLAMA_ARG_CTX_SIZE", Modeled, nil, nil},
		{"--ctx_size", "", 0, "", "", nil, nil},
		{"-ctx-size", "--ctx-size", 1, "LLAMA_ARG_CTX_SIZE", Modeled, nil, nil},
		{"--control-vector-layer-range", "--control-vector-layer-range", 2, "", Refused, []Program{Server}, nil},
		{"-ts", "--tensor-split", 1, "LLAMA_ARG_TENSOR_SPLIT", Modeled, nil, nil},
		{"-hf", "--hf-repo", 1, "LLAMA_ARG_HF_REPO", Model, nil, nil},
		{"--jinja", "--jinja", 0, "LLAMA_ARG_JINJA", PassThrough, []Program{Server}, nil},
		{"--no-jinja", "--jinja", 0, "LLAMA_ARG_JINJA", PassThrough, nil, nil},
		{"-p", "--prompt", 1, "", PassThrough, []Program{CLI, Completion}, []Program{Server}},
		{"-sm", "--split-mode", 1, "LLAMA_ARG_SPLIT_MODE", Refused, nil, nil},
		{"-fitp", "--fit-print", 1, "LLAMA_ARG_FIT_ESTIMATE", PassThrough, []Program{FitParams}, []Program{Server}},
	} {
		e := tb.Lookup(c.typed)
		if c.key == "" {
			if e != nil {
				t.Errorf("%s: found %s, want no flag", c.typed, e.Key())
			}
			continue
		}
		if e == nil {
			t.Errorf("%s: not found", c.typed)
			continue
		}
		if e.Key() != c.key || e.Values != c.values || e.Env != c.env || e.Use != c.use {
			t.Errorf("%s: %s, %d values, env %q, %s; want %s, %d, %q, %s", c.typed, e.Key(), e.Values, e.Env, e.Use, c.key, c.values, c.env, c.use)
		}
		for _, p := range c.programs {
			if !e.Accepts(p) {
				t.Errorf("%s: %s does not take it, want it to (programs %v)", c.typed, p, e.Programs)
			}
		}
		for _, p := range c.not {
			if e.Accepts(p) {
				t.Errorf("%s: %s takes it, want not", c.typed, p)
			}
		}
	}
}

// TestHelpOfInstalledBuild reads the --help of the llama-server that
// HEADROOM_LLAMA_SERVER names, and of llama-fit-params beside it: every
// flag must be classified, and where the build is a held one its table
// must be the one held (a build that adds a flag fails here until it is
// classified).
func TestHelpOfInstalledBuild(t *testing.T) {
	bin := os.Getenv("HEADROOM_LLAMA_SERVER")
	if bin == "" {
		if os.Getenv("HEADROOM_REQUIRE_ENGINE") != "" {
			t.Fatal("HEADROOM_REQUIRE_ENGINE is set and HEADROOM_LLAMA_SERVER is not")
		}
		t.Skip("HEADROOM_LLAMA_SERVER names no llama-server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	classes := classes()
	for _, p := range []Program{Server, FitParams} {
		path := filepath.Join(filepath.Dir(bin), string(p))
		out, err := exec.CommandContext(ctx, path, "--help").CombinedOutput()
		if err != nil {
			t.Fatalf("%s --help: %v", path, err)
		}
		flags, err := ParseHelp(string(out))
		if err != nil {
			t.Fatalf("%s --help: %v", path, err)
		}
		for _, f := range flags {
			if _, ok := classes[f.Key()]; !ok {
				t.Errorf("%s: %s is not classified (llamaflags/classes.go)", p, strings.Join(f.Names, ", "))
			}
		}
		ver, _ := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
		for _, b := range Builds() {
			if !strings.Contains(string(ver), "commit "+b) {
				continue
			}
			held, _ := helpFS.ReadFile("help/" + b + "/" + string(p) + ".txt")
			want, _ := ParseHelp(string(held))
			if !slices.EqualFunc(flags, want, func(a, b Flag) bool { return slices.Equal(a.Names, b.Names) && a.Values == b.Values && a.Env == b.Env }) {
				t.Errorf("%s of build %s lists other flags than llamaflags/help/%s/%s.txt", p, b, b, p)
			}
		}
	}
}

// TestHeldBuildsMeasured: every folder of tables is a measured build's.
func TestHeldBuildsMeasured(t *testing.T) {
	ds, err := helpFS.ReadDir("help")
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != len(Builds()) {
		t.Errorf("held folders %d, measured builds among them %v: a folder names a build builds.Measured does not list", len(ds), Builds())
	}
}

// TestUnion: a flag only the older build has is known to the union, and
// a flag of both builds is the newest's.
func TestUnion(t *testing.T) {
	u, err := Union()
	if err != nil {
		t.Fatal(err)
	}
	newest, err := For("")
	if err != nil {
		t.Fatal(err)
	}
	if newest.Lookup("--no-mmap") != nil {
		t.Skip("the newest held build has --no-mmap again")
	}
	if e := u.Lookup("--no-mmap"); e == nil || e.Use != Modeled {
		t.Errorf("--no-mmap (80fb11a's) in the union: %+v", e)
	}
	if e := u.Lookup("--log-jsonl"); e == nil {
		t.Error("--log-jsonl (de3ff81's) is not in the union")
	}
	if u.Lookup("-c") != nil && len(u.Entries()) <= len(newest.Entries()) {
		t.Errorf("the union has %d flags, the newest build %d", len(u.Entries()), len(newest.Entries()))
	}
}
