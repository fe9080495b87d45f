package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateRecommend = flag.Bool("update-recommend", false, "rewrite the recommend command's golden file under testdata")

func TestRecommendGolden(t *testing.T) {
	code, out, errs := run(t, "recommend", "--machine", "rtx-4090", "--all")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	golden := filepath.Join("testdata", "recommend-rtx-4090.golden")
	if *updateRecommend {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update-recommend to create it)", err)
	}
	if out != string(want) {
		t.Errorf("output differs from %s (run with -update-recommend and read the diff):\n%s", golden, out)
	}
}

func TestRecommendJSON(t *testing.T) {
	code, out, errs := run(t, "recommend", "--machine", "m4-max-64", "--json", "--capability", "vision", "--goal", "quality")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got struct {
		Speed string `json:"speed"`
		Rows  []struct {
			Entry        string          `json:"entry"`
			Provenance   string          `json:"provenance"`
			Capabilities []string        `json:"capabilities"`
			Verdict      string          `json:"verdict"`
			Enabled      bool            `json:"enabled"`
			Quality      json.RawMessage `json:"quality"`
			Speed        json.RawMessage `json:"speed"`
		} `json:"configurations"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.Speed, "decode speed estimated for every fitting row") || len(got.Rows) == 0 {
		t.Fatalf("speed %q, %d rows", got.Speed, len(got.Rows))
	}
	withSpeed := 0
	for _, r := range got.Rows {
		if r.Provenance != "derived" || !strings.Contains(strings.Join(r.Capabilities, ","), "vision") {
			t.Errorf("%+v", r)
		}
		// A quality is null or a score with where it was published.
		var q *struct {
			Score  float64 `json:"score"`
			Source string  `json:"source"`
			Date   string  `json:"date"`
		}
		if err := json.Unmarshal(r.Quality, &q); err != nil || q != nil && (q.Score <= 0 || q.Source == "" || q.Date == "") {
			t.Errorf("%s quality %s", r.Entry, r.Quality)
		}
		if string(r.Speed) != "null" {
			withSpeed++
			if !strings.Contains(string(r.Speed), `"decode_tokens_per_sec"`) {
				t.Errorf("%s speed %s", r.Entry, r.Speed)
			}
		}
	}
	if withSpeed == 0 {
		t.Errorf("no row has a speed estimate")
	}
}

func TestRecommendUsage(t *testing.T) {
	for _, args := range [][]string{{"recommend", "--goal", "fastest"}, {"recommend", "extra"}, {"catalog"}, {"catalog", "unlock"}} {
		if code, _, _ := run(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// TestCatalogLockUnreachable: without a reachable Hub the lock fails with
// a message that names the variant, the endpoint, and that nothing was
// written.
func TestCatalogLockUnreachable(t *testing.T) {
	var out, errb bytes.Buffer
	dir := t.TempDir()
	env := Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string {
		return map[string]string{"HOME": dir, "HF_ENDPOINT": "http://127.0.0.1:1"}[k]
	}}
	lockFile := filepath.Join(dir, "lock.json")
	code := Main(context.Background(), []string{"catalog", "lock", "--quiet", "--out", lockFile}, env)
	if code != exitError {
		t.Fatalf("exit %d, want %d", code, exitError)
	}
	msg := errb.String()
	for _, want := range []string{"catalog lock:", "llama-3.2-1b-instruct/Q4_K_M", "http://127.0.0.1:1", "nothing was written"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if _, err := os.Stat(lockFile); err == nil {
		t.Error("a lock file was written")
	}
}
