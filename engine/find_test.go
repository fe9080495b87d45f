package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "llama-server")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	found := func(string) (string, error) { return "/opt/llama/bin/llama-server", nil }
	missing := func(name string) (string, error) { return "", errors.New("executable file not found in $PATH") }

	type findCase struct {
		name     string
		explicit string
		lookPath func(string) (string, error)
		want     string
		wantErr  string
		notFound bool
	}
	tests := []findCase{
		{name: "explicit executable", explicit: exe, lookPath: missing, want: exe},
		{name: "explicit wins over PATH", explicit: exe, lookPath: found, want: exe},
		{name: "explicit missing", explicit: filepath.Join(dir, "nope"), lookPath: found, wantErr: "--llama-server"},
		{name: "explicit directory", explicit: dir, lookPath: found, wantErr: "found a directory"},
		{name: "on PATH", lookPath: found, want: "/opt/llama/bin/llama-server"},
		{name: "nowhere", lookPath: missing, wantErr: "install llama.cpp", notFound: true},
	}
	if runtime.GOOS != "windows" {
		tests = append(tests, findCase{name: "explicit not executable", explicit: plain, lookPath: found, wantErr: "not executable"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Find(tt.explicit, tt.lookPath)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Find: %q, %v; want an error containing %q", got, err, tt.wantErr)
				}
				if errors.Is(err, ErrNotFound) != tt.notFound {
					t.Errorf("errors.Is(err, ErrNotFound) = %v, want %v", !tt.notFound, tt.notFound)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Find: %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestFindOnPath uses the real PATH lookup.
func TestFindOnPath(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in is named for unix")
	}
	t.Setenv("PATH", filepath.Dir(fakeBin))
	got, err := Find("", nil)
	if err != nil || got != fakeBin {
		t.Errorf("Find on PATH: %q, %v; want %q", got, err, fakeBin)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := Find("", nil); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "--llama-server") {
		t.Errorf("Find with llama-server absent: %v, want ErrNotFound telling how to fix it", err)
	}
}

func TestVersionOfFake(t *testing.T) {
	t.Parallel()
	b, err := Version(context.Background(), fakeBin)
	if err != nil {
		t.Fatal(err)
	}
	if b.Number != 6789 || b.Commit != "abc1234" || b.Compiler != "cc (Debian 12.2.0-14) 12.2.0" || b.Target != "x86_64-linux-gnu" {
		t.Errorf("Version = %+v", b)
	}
	if b.String() != "b6789 (abc1234)" {
		t.Errorf("String() = %q", b.String())
	}
}

func TestVersionNotLlamaServer(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs a shell script")
	}
	t.Parallel()
	script := filepath.Join(t.TempDir(), "impostor")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'impostor 1.0'\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Version(context.Background(), script)
	if err == nil || !strings.Contains(err.Error(), `"impostor 1.0"`) || !strings.Contains(err.Error(), "exit status 2") {
		t.Errorf("Version of a non-llama-server: %v, want an error quoting its output and status", err)
	}
}

func TestParseVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		out  string
		want Build
		err  string
	}{
		{
			name: "linux gcc",
			out:  "version: 6789 (abc1234)\nbuilt with cc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0 for x86_64-linux-gnu\n",
			want: Build{Number: 6789, Commit: "abc1234", Compiler: "cc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0", Target: "x86_64-linux-gnu"},
		},
		{
			name: "cuda build with device lines first",
			out: "ggml_cuda_init: found 1 CUDA devices:\n  Device 0: NVIDIA H200, compute capability 9.0, VMM: yes\n" +
				"load_backend: loaded CUDA backend from /app/libggml-cuda.so\nversion: 7102 (3f9da22c)\nbuilt with GNU 13.3.0 for Linux x86_64\n",
			want: Build{Number: 7102, Commit: "3f9da22c", Compiler: "GNU 13.3.0", Target: "Linux x86_64"},
		},
		{
			name: "compiler naming a for",
			out:  "version: 1 (a)\nbuilt with cc for embedded for aarch64-none-elf\n",
			want: Build{Number: 1, Commit: "a", Compiler: "cc for embedded", Target: "aarch64-none-elf"},
		},
		{
			name: "apple clang",
			out:  "version: 5370 (814f795e)\r\nbuilt with Apple clang version 16.0.0 (clang-1600.0.26.6) for arm64-apple-darwin24.4.0\r\n",
			want: Build{Number: 5370, Commit: "814f795e", Compiler: "Apple clang version 16.0.0 (clang-1600.0.26.6)", Target: "arm64-apple-darwin24.4.0"},
		},
		{
			name: "msvc",
			out:  "version: 10021 (33a75f41)\nbuilt with MSVC 19.40.33811.0 for x64\n",
			want: Build{Number: 10021, Commit: "33a75f41", Compiler: "MSVC 19.40.33811.0", Target: "x64"},
		},
		{
			name: "outside git, no build line",
			out:  "version: 0 (unknown)\n",
			want: Build{Number: 0, Commit: "unknown"},
		},
		{
			// node-llama-cpp's source bundle built with cmake, as
			// conformance/engine.sh builds it.
			name: "packaged source tree",
			out:  "version: 0.4.0-dev (build 1, commit 80fb11a)\nbuilt with GNU 12.2.0 for Linux x86_64\n",
			want: Build{Number: 1, Release: "0.4.0-dev", Commit: "80fb11a", Compiler: "GNU 12.2.0", Target: "Linux x86_64"},
		},
		{name: "not llama.cpp", out: "usage: llama-server [options]\n", err: `"usage: llama-server [options]"`},
		{name: "empty", out: "", err: `got ""`},
		{name: "long output is cut", out: strings.Repeat("x", 5000), err: "..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseVersion(tt.out)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || len(err.Error()) > 400 {
					t.Errorf("ParseVersion: %+v, %v; want a short error containing %q", got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got.Raw = ""
			if got != tt.want {
				t.Errorf("ParseVersion = %+v, want %+v", got, tt.want)
			}
			want := fmt.Sprintf("b%d (%s)", tt.want.Number, tt.want.Commit)
			if tt.want.Release != "" {
				want = tt.want.Release + " (" + tt.want.Commit + ")"
			}
			if got.String() != want {
				t.Errorf("String() = %q, want %q", got.String(), want)
			}
		})
	}
}
