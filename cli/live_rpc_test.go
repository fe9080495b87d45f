package cli

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/synth"
)

// rpcServerNextTo finds the rpc-server built beside llama-server
// (conformance/engine.sh builds ggml-rpc-server; upstream names it
// rpc-server).
func rpcServerNextTo(t *testing.T, llamaServer string) string {
	t.Helper()
	for _, name := range []string{"ggml-rpc-server", "rpc-server"} {
		p := filepath.Join(filepath.Dir(llamaServer), name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("HEADROOM_REQUIRE_ENGINE") == "1" {
		t.Fatalf("HEADROOM_REQUIRE_ENGINE=1 but there is no ggml-rpc-server or rpc-server next to %s (build llama.cpp with -DGGML_RPC=ON)", llamaServer)
	}
	t.Skipf("no rpc-server next to %s", llamaServer)
	return ""
}

// startRPCServer starts one rpc-server on a free loopback port and stops
// it when the test ends.
func startRPCServer(t *testing.T, bin string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port), "-t", "1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	ep := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := net.DialTimeout("tcp", ep, time.Second)
		if err == nil {
			c.Close()
			return ep
		}
		if time.Now().After(deadline) {
			t.Fatalf("rpc-server on %s not listening: %v", ep, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLiveServeCheckRPC is `headroom serve MODEL --rpc A,B --check` with
// the real llama-server and two real rpc-servers on this machine: the
// plan asks each server for its devices, splits the layers over them, and
// every buffer llama-server logs, the remote ones named
// RPC0[127.0.0.1:PORT], must be within the accounting bounds.
func TestLiveServeCheckRPC(t *testing.T) {
	bin := liveEngine(t)
	rpcBin := rpcServerNextTo(t, bin)
	a, b := startRPCServer(t, rpcBin), startRPCServer(t, rpcBin)
	path := writeShape(t, t.TempDir(), "qwen3-0.6b", synth.Q8_0)
	var out, errOut bytes.Buffer
	env := liveEnv(t, &out, &errOut)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	code := Main(ctx, []string{"serve", path, "--check", "--llama-server", bin, "--rpc", a + "," + b, "-c", "4096"}, env)
	t.Logf("exit %d\n%s", code, out.String())
	if code != 0 || !strings.Contains(out.String(), "check passed") {
		t.Fatalf("serve --rpc --check failed (exit %d):\n%s\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"--rpc " + a + "," + b, "-ts ", "RPC0[" + a + "] model", "RPC0[" + b + "] kv", "RPC0[" + b + "] compute"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}
