package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// buildHeadroom builds this command into a temporary directory, so the
// benchmarks time the whole process as a user runs it: start, catalog,
// machine, plans, output.
func buildHeadroom(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "headroom")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func runRecommend(b *testing.B, bin, cacheHome string) {
	b.Helper()
	cmd := exec.Command(bin, "recommend", "--machine", "cpu-32")
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cacheHome)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("headroom recommend: %v\n%s", err, out)
	}
}

// BenchmarkRecommendProcess runs 'headroom recommend --machine cpu-32' as
// a process, as a user's second and later runs are: every variant's plan
// is in the cache from the first. The target is 300 ms.
func BenchmarkRecommendProcess(b *testing.B) {
	bin := buildHeadroom(b)
	cache := b.TempDir()
	runRecommend(b, bin, cache)
	for b.Loop() {
		runRecommend(b, bin, cache)
	}
}

// BenchmarkRecommendProcessCold is a first run: an empty cache, so every
// header is derived and every variant planned.
func BenchmarkRecommendProcessCold(b *testing.B) {
	bin := buildHeadroom(b)
	for b.Loop() {
		runRecommend(b, bin, b.TempDir())
	}
}
