package engine

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/engine/enginetest"
)

// fakeBin is the stand-in llama-server, built once for this test binary.
// It is set in TestMain before any test runs and only read afterwards.
var fakeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "engine-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	fakeBin, err = enginetest.Build(ctx, dir)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
