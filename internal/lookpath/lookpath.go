// Package lookpath finds programs on PATH the way headroom runs them: an
// absolute path only. A relative or empty PATH entry (".", "bin", "")
// names whatever directory headroom happens to run in, where anyone who
// can write a file could plant a llama-server, llama-bench or
// nvidia-smi; such a match is refused with the reason, where a shell
// would run it.
package lookpath

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
)

// ErrRelative is wrapped by the error for a program found only through a
// relative or empty PATH entry.
var ErrRelative = errors.New("found only through a relative PATH entry")

// LookPath is exec.LookPath refusing a match in a relative or empty PATH
// entry (Go's exec.ErrDot, which exec.LookPath returns beside the path).
func LookPath(name string) (string, error) {
	p, err := exec.LookPath(name)
	if errors.Is(err, exec.ErrDot) || err == nil && !filepath.IsAbs(p) {
		return "", fmt.Errorf("%s is %s (%s): refused, since any file there would run; put an absolute directory on PATH or name the program: %w",
			name, "found only through a relative or empty PATH entry", p, ErrRelative)
	}
	if err != nil {
		return "", err
	}
	return p, nil
}
