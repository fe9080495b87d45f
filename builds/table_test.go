package builds

import (
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"
)

// The table must give the measured builds the rules their golden cases
// were measured under: 80fb11a has none of the changes of v0.5.0's
// cycle, de3ff81 all of them.
func TestMeasuredBuildRules(t *testing.T) {
	bs := Measured()
	if len(bs) != 2 || bs[0].Commit != "80fb11a" || bs[1].Commit != "de3ff81" {
		t.Fatalf("measured builds %+v", bs)
	}
	old, de := bs[0].Rules, bs[1].Rules
	if !old.OutIDs || !old.KVSetRows || !old.ReserveOutputsMax || !old.CUDAReduceDeps || old.VulkanFusion || old.NextNWithoutKV || old.LoadMode || old.GDNNormAsRMS {
		t.Errorf("80fb11a: %+v", old)
	}
	want := old
	want.NextNWithoutKV, want.LoadMode, want.VulkanFusion, want.SplitInputsGrow, want.GDNNormAsRMS, want.CUDATopKDeps, want.MetalFusion = true, true, true, true, true, true, true
	want.CheckpointsToCap = true
	if de != want {
		t.Errorf("de3ff81: %+v, want %+v", de, want)
	}
	if Default() != de || Newest().Commit != "de3ff81" {
		t.Errorf("default %+v", Newest())
	}
}

// Each change turns its rule on at its first build and not before, and
// every boolean of Rules is some change's: a field without a row would
// be false for every build.
func TestEveryRuleHasItsRow(t *testing.T) {
	rows := map[string]int{}
	for _, c := range changes() {
		var r Rules
		p := c.Rule(&r)
		*p = true
		name := ""
		v := reflect.ValueOf(r)
		for i := range v.NumField() {
			if f := v.Field(i); f.Kind() == reflect.Bool && f.Bool() {
				name = v.Type().Field(i).Name
			}
		}
		if name == "" {
			t.Fatalf("%q turns on no boolean", c.What)
		}
		rows[name] = c.From
		if get := func(n int) bool { r := For(n); return *c.Rule(&r) }; get(c.From-1) || !get(c.From) {
			t.Errorf("%s: on at b%d is %v, at b%d is %v", name, c.From-1, get(c.From-1), c.From, get(c.From))
		}
	}
	typ := reflect.TypeFor[Rules]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Type.Kind() != reflect.Bool || f.Name == "OutputEmbd" {
			continue
		}
		if _, ok := rows[f.Name]; !ok {
			t.Errorf("Rules.%s has no row in the table", f.Name)
		}
	}
	if len(rows) != 19 {
		t.Errorf("%d rules in the table, want 19", len(rows))
	}
}

// A build inside a change's bounds gets the newer rule and is told so;
// builds outside the table are told that too.
func TestRuledBounds(t *testing.T) {
	br := Ruled(10850)
	if !br.Rules.VulkanFusion || !strings.Contains(strings.Join(br.Uncertain, " "), "Vulkan") {
		t.Errorf("b10850: %+v", br)
	}
	if br := Ruled(10900); len(br.Uncertain) != 3 || !strings.Contains(br.Uncertain[0], "top-k") || !strings.Contains(br.Uncertain[1], "Metal") || !strings.Contains(br.Uncertain[2], "checkpoints") {
		t.Errorf("b10900 should be uncertain only about the CUDA, Metal and checkpoint changes: %q", br.Uncertain)
	}
	if br := Ruled(6699); len(br.Uncertain) != 0 || br.Outside != "" || len(br.Predates) != 13 {
		t.Errorf("b6699: %d predated, %+v", len(br.Predates), br)
	}
	if br := Ruled(Newest().Number + 1); !strings.Contains(br.Outside, "newer than b11146 (v0.5.0)") || br.Rules != Default() {
		t.Errorf("a build after the newest measured: %+v", br)
	}
	if br := Ruled(Oldest - 1); br.Outside == "" || br.Rules != (Rules{}) {
		t.Errorf("a build before b%d: %+v", Oldest, br)
	}
}

// A commit is found by a prefix of seven characters or more, either way.
func TestIdentify(t *testing.T) {
	for _, tt := range []struct {
		commit string
		want   string
	}{{"80fb11a", "80fb11a"}, {"DE3FF81", "de3ff81"}, {"80fb11a3c2", "80fb11a"}, {"80fb", ""}, {"1234567", ""}} {
		b, ok := Identify(tt.commit)
		if ok != (tt.want != "") || b.Commit != tt.want {
			t.Errorf("%q: %+v %v", tt.commit, b, ok)
		}
	}
}

var updateDoc = flag.Bool("update-doc", false, "rewrite docs/builds.md from the table")

// docs/builds.md is the table as the code has it.
func TestDoc(t *testing.T) {
	got := Markdown()
	if strings.Contains(got, "| `?` |") {
		t.Error("a change names no field")
	}
	const path = "../docs/builds.md"
	if *updateDoc {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil || string(want) != got {
		t.Errorf("docs/builds.md is stale (%v); run go test ./builds -update-doc", err)
	}
}
