package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/headroom-llm/headroom/internal/lookpath"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// BinaryName is the llama.cpp server program Find looks for on PATH.
const BinaryName = "llama-server"

// ErrNotFound is wrapped by Find's error when no llama-server can be found.
var ErrNotFound = errors.New("llama-server not found")

// Find returns the llama-server to run: explicit when it is set (it must be
// an existing executable file), otherwise llama-server on PATH as lookPath
// finds it. A nil lookPath means lookpath.LookPath, which refuses a match
// through a relative PATH entry. When none is found the
// error tells the user how to get one and wraps ErrNotFound.
func Find(explicit string, lookPath func(string) (string, error)) (string, error) {
	if explicit != "" {
		fi, err := os.Stat(explicit)
		if err != nil {
			return "", fmt.Errorf("--llama-server %s: want an executable llama-server, but %w", explicit, err)
		}
		if !fi.Mode().IsRegular() {
			return "", fmt.Errorf("--llama-server %s: want an executable file, found a %s", explicit, describeMode(fi.Mode()))
		}
		// Windows has no execute bit; the extension decides there.
		if runtime.GOOS != "windows" && fi.Mode().Perm()&0o111 == 0 {
			return "", fmt.Errorf("--llama-server %s: want an executable file, but it is not executable (mode %s)", explicit, fi.Mode().Perm())
		}
		return explicit, nil
	}
	if lookPath == nil {
		lookPath = lookpath.LookPath
	}
	path, err := lookPath(BinaryName)
	if err != nil || path == "" {
		return "", fmt.Errorf("%w on PATH (%v): install llama.cpp (https://github.com/ggml-org/llama.cpp, or your package manager's llama.cpp) or pass --llama-server PATH", ErrNotFound, err)
	}
	return path, nil
}

func describeMode(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeSymlink != 0:
		return "symbolic link"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device"
	}
	return "non-regular file"
}

// Build identifies a llama.cpp build as its --version reports it.
type Build struct {
	// Number is the build number: the bNNNN of llama.cpp's release tags,
	// or the counter a packaged build carries (node-llama-cpp's source
	// bundles say "build 1", which names nothing).
	Number int `json:"number"`
	// Release is the version name a packaged build prints instead of a
	// build number ("0.4.0-dev"); empty for upstream builds.
	Release string `json:"release,omitempty"`
	// Commit is the short commit hash, or "unknown" for builds made outside
	// a git checkout.
	Commit   string `json:"commit"`
	Compiler string `json:"compiler,omitempty"`
	Target   string `json:"target,omitempty"`
	// Raw is the whole output of --version.
	Raw string `json:"raw"`
}

// String reads like a llama.cpp release name: "b6789 (abc1234)", or
// "0.4.0-dev (1a2b3c4)" for a packaged build.
func (b Build) String() string {
	if b.Release != "" {
		return fmt.Sprintf("%s (%s)", b.Release, b.Commit)
	}
	if b.Commit == "" {
		return fmt.Sprintf("b%d", b.Number)
	}
	return fmt.Sprintf("b%d (%s)", b.Number, b.Commit)
}

// VersionTimeout bounds how long Version waits for --version. Loading
// backend libraries can take a moment; a hang means the binary is not a
// llama-server at all.
const VersionTimeout = 15 * time.Second

// llama.cpp prints "version: %d (%s)" and "built with %s for %s" to stderr
// (common/arg.cpp); builds from a packaged source tree (node-llama-cpp's
// bundles, distribution packages) print "version: 0.4.0-dev (build 1,
// commit 1a2b3c4)" instead. Dynamic-backend builds may print backend
// loading lines before them, so both are searched line by line. The target
// is the C compiler's -dumpmachine ("x86_64-linux-gnu") or, in newer
// builds, system and processor ("Linux x86_64"), so the line splits at its
// last " for ".
var (
	versionLine  = regexp.MustCompile(`(?m)^version: (\d+) \(([^)\s]*)\)\s*$`)
	releaseLine  = regexp.MustCompile(`(?m)^version: (\S+) \(build (\d+), commit ([^)\s]*)\)\s*$`)
	builtLine    = regexp.MustCompile(`(?m)^built with (.+) for (.+?)\s*$`)
	versionWords = `"version: N (commit)" or "version: X (build N, commit C)"`
)

// Version runs bin --version and parses what it prints.
func Version(ctx context.Context, bin string) (Build, error) {
	ctx, cancel := context.WithTimeout(ctx, VersionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.WaitDelay = time.Second
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return Build{}, fmt.Errorf("%s --version: no answer within %s: %w", bin, VersionTimeout, ctx.Err())
	}
	b, err := ParseVersion(out.String())
	if err != nil {
		if runErr != nil {
			return Build{}, fmt.Errorf("%s --version: %w (%v)", bin, err, runErr)
		}
		return Build{}, fmt.Errorf("%s --version: %w", bin, err)
	}
	return b, nil
}

// ParseVersion reads llama.cpp's --version output. The "version:" line is
// required; the "built with" line is read when present.
func ParseVersion(out string) (Build, error) {
	out = strings.ReplaceAll(out, "\r\n", "\n")
	var b Build
	number := ""
	if m := versionLine.FindStringSubmatch(out); m != nil {
		number, b.Commit = m[1], m[2]
	} else if m := releaseLine.FindStringSubmatch(out); m != nil {
		b.Release, number, b.Commit = m[1], m[2], m[3]
	} else {
		return Build{}, fmt.Errorf("want a %s line as llama.cpp prints, got %q", versionWords, excerpt(out, 200))
	}
	n, err := strconv.Atoi(number)
	if err != nil {
		return Build{}, fmt.Errorf("build number %q in %q: %w", number, excerpt(out, 200), err)
	}
	b.Number, b.Raw = n, out
	if bm := builtLine.FindStringSubmatch(out); bm != nil {
		b.Compiler, b.Target = strings.TrimSpace(bm[1]), bm[2]
	}
	return b, nil
}
