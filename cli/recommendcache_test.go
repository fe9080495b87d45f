package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/headroom-llm/headroom/hw"
)

// machineFile writes preset as a machine file whose system memory had
// free bytes free, as 'headroom hw --json' writes a probed machine.
func machineFile(t testing.TB, dir, preset string, free int64) string {
	t.Helper()
	s, err := hw.LoadMachine(preset)
	if err != nil {
		t.Fatal(err)
	}
	s.Domains[0].Free = &free
	var b bytes.Buffer
	if err := s.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, preset+".json")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// recommendIn runs recommend with home as the home directory.
func recommendIn(t testing.TB, home string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	env := Env{Stdout: &out, Stderr: &out, Getenv: func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}}
	if code := Main(context.Background(), append([]string{"recommend"}, args...), env); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	return out.String()
}

// Two runs of recommend on a machine whose free memory moved by a few MiB
// between them (as a real one does) print the same rows, from one kept
// plan: the cache is keyed by the machine's capacity, not its free memory.
func TestRecommendCacheSameRows(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	s, err := hw.LoadMachine("cpu-32")
	if err != nil {
		t.Fatal(err)
	}
	free := s.Domains[0].Capacity - 9<<30
	first := recommendIn(t, home, "--all", "--machine", machineFile(t, dir, "cpu-32", free))
	second := recommendIn(t, home, "--all", "--machine", machineFile(t, dir, "cpu-32", free-5<<20))
	if first != second {
		t.Errorf("two runs 5 MiB apart differ:\n%s\n---\n%s", first, second)
	}
	kept, err := filepath.Glob(filepath.Join(home, ".cache", "headroom", "recommend", "recommend-*.json"))
	if err != nil || len(kept) != 1 {
		t.Errorf("the runs kept %d plan files (%v), want 1", len(kept), err)
	}
}

// BenchmarkRecommendWarm is the whole command, 'headroom recommend
// --machine cpu-32', with the plans kept by an earlier run.
func BenchmarkRecommendWarm(b *testing.B) {
	home := b.TempDir()
	recommendIn(b, home, "--machine", "cpu-32")
	b.ReportAllocs()
	for b.Loop() {
		recommendIn(b, home, "--machine", "cpu-32")
	}
}

// BenchmarkRecommendCold is the same command with nothing kept: every
// configuration planned.
func BenchmarkRecommendCold(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		home := b.TempDir()
		b.StartTimer()
		recommendIn(b, home, "--machine", "cpu-32")
	}
}
