// Package enginetest provides a stand-in llama-server for tests of code
// that starts one through package engine, and a stand-in llama-fit-params
// (FitParams) for tests of llama.cpp's projection. The stand-in server takes llama-server's
// -m, --host and --port flags, prints a llama.cpp-shaped log and serves
// /health and /completion; its environment picks how it behaves:
//
//	FAKE_LLAMA_MODE   good (default), init-oom, broken-health,
//	                  broken-completion, error-exit, silent-exit,
//	                  never-ready, slow-exit
//	FAKE_LLAMA_ARGV   file it writes its arguments to, as a JSON array
//	FAKE_LLAMA_LOG    file whose lines it prints as the load log
//	FAKE_LLAMA_LOAD_MS  how long its loading takes (default 200)
//
// Pass these through engine.Options.Env. The modes are described in
// engine/internal/fakeserver.
package enginetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// FakePackage is the import path of the stand-in's main package.
const FakePackage = "github.com/headroom-llm/headroom/engine/internal/fakeserver"

// BuildFake builds the stand-in llama-server and returns its path. The
// binary is cached under the system's temporary directory, keyed by the
// stand-in's source and the Go toolchain, so a test process (or many, run
// in parallel by go test) builds it once and later calls cost a hash of
// one file.
func BuildFake(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root, err := moduleRoot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key, err := sourceKey(filepath.Join(root, "engine", "internal", "fakeserver"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(os.TempDir(), "headroom-enginetest", key)
	bin := filepath.Join(dir, exeName("llama-server"))
	if fileExists(bin) {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Build beside the final name and rename, so a parallel test process
	// never runs a half-written binary.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	built, err := Build(ctx, tmp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(built, bin); err != nil {
		t.Fatalf("enginetest: installing the stand-in llama-server: %v", err)
	}
	return bin
}

// Build builds the stand-in llama-server into dir (which must exist) and
// returns its path. It is for a TestMain that wants a private copy.
func Build(ctx context.Context, dir string) (string, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, exeName("llama-server"))
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", bin, FakePackage)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("enginetest: go build %s: %w\n%s", FakePackage, err, out)
	}
	return bin, nil
}

// goTool is the go command of the toolchain running the tests, or the one
// on PATH when that toolchain's tree is not at hand.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", exeName("go")); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func exeName(name string) string {
	if runtime.GOOS == "windows" {
		return name + ".exe"
	}
	return name
}

// moduleRoot finds headroom's module root from the test's directory.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, goTool(), "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("enginetest: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("enginetest: want to run inside the headroom module, but go env GOMOD is %q", gomod)
	}
	return filepath.Dir(gomod), nil
}

// sourceKey hashes the stand-in's sources with the toolchain version and
// target, naming one build of it.
func sourceKey(dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		return "", fmt.Errorf("enginetest: want the stand-in's sources in %s, found none (%v)", dir, err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return "", fmt.Errorf("enginetest: %w", err)
		}
		fmt.Fprintf(h, "%s\n", filepath.Base(f))
		_, err = io.Copy(h, fh)
		fh.Close()
		if err != nil {
			return "", fmt.Errorf("enginetest: reading %s: %w", f, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// Buffer is an output sink safe to read while a server or a command is
// still writing to it (a bytes.Buffer is not).
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what has been written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
