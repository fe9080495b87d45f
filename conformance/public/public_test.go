package public

import (
	"encoding/json"
	"flag"
	"github.com/headroom-llm/headroom/builds"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/headroom-llm/headroom/engine"
)

var updatePublic = flag.Bool("update-public", false, "rewrite docs/accuracy-public.md from conformance/testdata/public")

const (
	casesDir = "../testdata/public"
	docPath  = "../../docs/accuracy-public.md"
)

func loadCases(t *testing.T) []Case {
	t.Helper()
	cases, err := Load(casesDir)
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestPublicParse holds every case's recorded buffers to what
// engine.ParseLog reads from its verbatim lines now, so a parser change
// that reads a public log differently fails here.
func TestPublicParse(t *testing.T) {
	for _, c := range loadCases(t) {
		got := engine.ParseLog(c.Lines)
		if !reflect.DeepEqual(got, c.Buffers) {
			t.Errorf("%s: ParseLog reads\n%+v\nthe case records\n%+v", c.ID, got, c.Buffers)
		}
		if len(got) == 0 {
			t.Errorf("%s: no buffer lines", c.ID)
		}
	}
}

// TestPublicLogs plans every case and compares each buffer group. A miss
// does not fail (these backends are not measured here); the test fails
// when docs/accuracy-public.md is not what the data gives now, and when an
// explanation is stale: kept for a group that no longer misses.
func TestPublicLogs(t *testing.T) {
	cases := loadCases(t)
	var rows []Row
	for i := range cases {
		c := &cases[i]
		rs, err := c.Compare()
		if err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		missed := map[string]bool{}
		for _, r := range rs {
			if r.Status == Miss {
				missed[r.BufferType+" "+r.Kind] = true
			}
		}
		for k := range c.Explanations {
			if !missed[k] {
				t.Errorf("%s: explanation for %q, which is not a miss", c.ID, k)
			}
		}
		rows = append(rows, rs...)
	}
	doc := Report(cases, rows)
	if *updatePublic {
		if err := os.WriteFile(docPath, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(have) != doc {
		t.Errorf("%s is stale; run go test ./conformance/public -run TestPublicLogs -update-public", filepath.Base(docPath))
	}
}

// TestLoadRejects checks validation catches a case whose buffers were
// edited by hand.
func TestLoadRejects(t *testing.T) {
	cases := loadCases(t)
	c := cases[0]
	c.Buffers = append([]engine.Logged(nil), c.Buffers...)
	c.Buffers[0].Printed = "1.23"
	if problems := c.validate(c.ID); len(problems) == 0 {
		t.Error("a hand-edited buffer passed validation")
	}
}

// TestPublicQuantMix holds the file synth builds for a case whose quant
// mix is known (under the older quantizer rules the case names) to the
// tensor type counts its log prints ("- type q4_K:   61 tensors"), so a
// weights group called equal is equal because the mix is, not by a
// coincidence of sums.
func TestPublicQuantMix(t *testing.T) {
	typeLine := regexp.MustCompile(`llama_model_loader: - type +([A-Za-z0-9_]+): +(\d+) tensors`)
	checked := 0
	for _, c := range loadCases(t) {
		logged := map[string]int{}
		for _, l := range c.Lines {
			if m := typeLine.FindStringSubmatch(l); m != nil {
				n, _ := strconv.Atoi(m[2])
				logged[strings.ToUpper(m[1])] = n
			}
		}
		if len(logged) == 0 || !c.Model.QuantKnown || c.Shape == nil {
			continue
		}
		m, err := c.BuildModel()
		if err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		mine := map[string]int{}
		for _, tn := range m.Tensors {
			mine[strings.ToUpper(tn.Type.String())]++
		}
		if !reflect.DeepEqual(mine, logged) {
			t.Errorf("%s: synth's file has %v tensors by type, the log %v", c.ID, mine, logged)
		}
		checked++
	}
	// The Pythia CI runs (20), the RX 7900 XTX's Qwen3-14B and the four
	// expert-offload CUDA loads (gpt-oss-20b, Qwen3-30B-A3B and the two
	// Qwen3-235B-A22B) print them.
	if checked < 25 {
		t.Errorf("%d cases checked against their logged type counts, want 25", checked)
	}
}

// TestBuildNumberRules holds builds.For, which plans a user's
// build from its number, to the rules each public case of a known
// upstream build needs for its logged figures: they must be the same
// rules, so the figures a user of that build is given are the ones
// compared with the log here.
func TestBuildNumberRules(t *testing.T) {
	checked := 0
	for _, c := range loadCases(t) {
		if c.BuildNumber < builds.Oldest {
			continue
		}
		if c.BuildRules == nil {
			t.Errorf("%s (build %d): no build_rules", c.ID, c.BuildNumber)
			continue
		}
		have := *c.BuildRules
		// What the build number does not decide: the cells a context
		// is padded to, and the output buffer of a library context.
		have.CtxPad, have.OutputRows, have.OutputEmbd = 0, 0, false
		have.ReserveOutputsMax = have.ReserveOutputsMax && c.BuildOutputs == 0
		want := builds.For(c.BuildNumber)
		if have != want {
			got, _ := json.Marshal(have)
			w, _ := json.Marshal(want)
			t.Errorf("%s (build %d): the case plans under %s, build %d's number implies %s", c.ID, c.BuildNumber, got, c.BuildNumber, w)
		}
		checked++
	}
	if checked < 25 {
		t.Errorf("%d cases of known builds checked, want 25", checked)
	}
}
