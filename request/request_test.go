package request

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/plan"
)

func TestParseProfile(t *testing.T) {
	for _, c := range []struct {
		args    string
		program plan.Program
		check   func(plan.Profile) bool
		err     string
	}{
		{args: "", check: func(p plan.Profile) bool {
			return p.Parallel == 4 && p.KVUnified && p.Ctx == 0 && p.Serving != nil && p.Serving.CacheRAM == 8192
		}},
		{args: "-c 8192 -np 2", check: func(p plan.Profile) bool { return p.Ctx == 8192 && p.Parallel == 2 && !p.KVUnified }},
		{args: "--ctx-size=4096 --parallel=2 -kvu", check: func(p plan.Profile) bool { return p.Ctx == 4096 && p.KVUnified }},
		{args: "--no-kv-unified", check: func(p plan.Profile) bool { return p.Parallel == 4 && !p.KVUnified }},
		{args: "-fa 1", check: func(p plan.Profile) bool { return p.FlashAttn == plan.FlashOn }},
		{args: "-fa disabled", check: func(p plan.Profile) bool { return p.FlashAttn == plan.FlashOff }},
		{args: "-ngl all", check: func(p plan.Profile) bool { return p.GPULayers == plan.GPULayersAuto }},
		{args: "-ngl 12", check: func(p plan.Profile) bool { return p.GPULayers == 12 }},
		{args: "-lm mmap+mlock", check: func(p plan.Profile) bool { return p.Mmap && p.Mlock }},
		{args: "-lm none", check: func(p plan.Profile) bool { return !p.Mmap }},
		{args: "-cmoe", check: func(p plan.Profile) bool { return p.CPUMoE > 1000 }},
		{args: "-cram 0 -ctxcp 4", check: func(p plan.Profile) bool { return p.Serving.CacheRAM == 0 && p.Serving.Checkpoints == 4 }},
		{args: "--jinja -t 2 --api-key k", check: func(p plan.Profile) bool {
			return strings.Join(p.Pass, " ") == "--jinja -t 2 --api-key k" && strings.HasSuffix(strings.Join(p.Args(), " "), "--jinja -t 2 --api-key k")
		}},
		{args: "", program: plan.ProgramCompletion, check: func(p plan.Profile) bool { return p.Parallel == 1 && p.Serving == nil }},
		{args: "-np 2", program: plan.ProgramLibrary, check: func(p plan.Profile) bool { return p.Parallel == 2 && p.Program == plan.ProgramLibrary }},
		{args: "-cram 0", program: plan.ProgramCompletion, err: "keeps no prompt cache"},
		{args: "-ctv q8_0 -fa off", err: "needs flash attention"},
		{args: "-fa maybe", err: "want on, off or auto"},
		{args: "-ctk q7", err: "want one of"},
		{args: "-np 0", err: "-np, --parallel 0"},
		{args: "-kvu --no-kv-unified", err: "contradict"},
		{args: "-sm row", err: "-sm: how layers are split"},
		{args: "-lm dio", err: "direct I/O"},
		{args: "--fit on", err: "only --fit off"},
		{args: "model.gguf", err: "name the model apart"},
	} {
		pr := c.program
		if pr == "" {
			pr = plan.ProgramServer
		}
		p, err := ParseProfile(strings.Fields(c.args), pr)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.args, err, c.err)
			}
		case err != nil:
			t.Errorf("%q: %v", c.args, err)
		case !c.check(p):
			t.Errorf("%q: profile %+v", c.args, p)
		}
	}
}

// searchOf registers the flags for a search and reads args.
func searchOf(t *testing.T, args string) (plan.SearchOptions, error) {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	r := Register(Flags{fs}, true)
	if err := fs.Parse(strings.Fields(args)); err != nil {
		t.Fatal(err)
	}
	return r.SearchOptions(plan.DefaultSearch(), nil)
}

func TestSearchOptions(t *testing.T) {
	o, err := searchOf(t, "")
	if err != nil || o.Fixed != (plan.Fixed{}) || o.Parallel != plan.DefaultSearch().Parallel || o.Base.KVUnified || !o.AllowQ8 {
		t.Errorf("no flags: %+v, %v; want nothing fixed, the search's slots, no unified cache", o.Fixed, err)
	}
	o, err = searchOf(t, "-c 8192 -ngl all -ctk q8_0 -cram 512 -np 3 -ncmoe 10 -fa off -b 1024")
	if err != nil {
		t.Fatal(err)
	}
	if o.Fixed.Ctx != 8192 || o.Fixed.GPULayers == nil || *o.Fixed.GPULayers != 999 || o.Fixed.CacheK != "q8_0" || o.Fixed.CacheV != "" ||
		o.Fixed.CacheRAM == nil || *o.Fixed.CacheRAM != 512 || o.Parallel != 3 || o.Base.CPUMoE != 10 || o.AllowQ8 || o.Base.Batch != 1024 {
		t.Errorf("kept: %+v, base %+v, allow q8 %v", o.Fixed, o.Base, o.AllowQ8)
	}
	if o.Base.Ctx != 0 || o.Base.CacheK != plan.Defaults().CacheK {
		t.Errorf("the kept values leaked into the search's base profile: %+v", o.Base)
	}
}

// FuzzParseProfile: any command line is read or refused with an error,
// never a panic, and what is read is a profile that passes its own
// check.
func FuzzParseProfile(f *testing.F) {
	for _, s := range []string{"-c 8192 -np 2", "--jinja -fa on -ctv q8_0", "-lm mmap+mlock -cmoe", "-ngl -1", "-- -c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		p, err := ParseProfile(strings.Fields(line), plan.ProgramServer)
		if err != nil {
			return
		}
		if err := p.Check(); err != nil {
			t.Fatalf("%q read into a profile that fails its check: %v", line, err)
		}
	})
}
