//go:build linux

package launch

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/admission"
	"github.com/headroom-llm/headroom/engine/enginetest"
)

// TestKilledHeadroomChild is the headroom that TestKilledHeadroom kills:
// it loads the small model through a shared ledger, prints its
// llama-server's pid and waits. It does nothing unless that test ran it.
func TestKilledHeadroomChild(t *testing.T) {
	ledgerPath := os.Getenv("HEADROOM_KILL_LEDGER")
	if ledgerPath == "" {
		t.Skip("run by TestKilledHeadroom")
	}
	bin := enginetest.BuildFake(t)
	f, a, path := cpuMamba(t)
	run, err := f.deps.Load(context.Background(), a, path, LoadOptions{Bin: bin, Ledger: &admission.Ledger{Path: ledgerPath},
		ReadyTimeout: 20 * time.Second, Env: []string{"FAKE_LLAMA_MODE=good"}})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("llama-server %d\n", run.Server.PID())
	time.Sleep(time.Minute) // until killed
}

// TestKilledHeadroom SIGKILLs a headroom that runs a model: its
// llama-server must die with it (before, it ran on, its booking was
// dropped with headroom's pid, and later admissions over-committed), and
// until then the booking must name it.
func TestKilledHeadroom(t *testing.T) {
	ledgerPath := filepath.Join(t.TempDir(), "ledger.json")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledHeadroomChild$", "-test.v")
	cmd.Env = append(os.Environ(), "HEADROOM_KILL_LEDGER="+ledgerPath)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	pidc := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "llama-server "); ok {
				n, _ := strconv.Atoi(rest)
				pidc <- n
			}
		}
		close(pidc)
	}()
	var server int
	select {
	case server = <-pidc:
	case <-time.After(60 * time.Second):
		t.Fatal("the child headroom did not start its model in 60 s")
	}
	if server <= 0 {
		t.Fatal("the child headroom exited without starting its model")
	}
	held, err := (&admission.Ledger{Path: ledgerPath}).Held()
	if err != nil || len(held) != 1 || held[0].ChildPID != server || held[0].ChildPGID != server || held[0].PID != cmd.Process.Pid {
		t.Fatalf("while it runs the ledger holds %+v (%v); want one booking naming headroom %d and llama-server %d", held, err, cmd.Process.Pid, server)
	}
	killed := time.Now()
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	deadline := killed.Add(5 * time.Second)
	for !processGone(server) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !processGone(server) {
		syscall.Kill(-server, syscall.SIGKILL)
		t.Fatalf("llama-server %d still runs 5 s after its headroom was killed", server)
	}
	t.Logf("llama-server gone %v after its headroom was killed", time.Since(killed).Round(time.Millisecond))
	if held, err := (&admission.Ledger{Path: ledgerPath}).Held(); err != nil || len(held) != 0 {
		t.Errorf("with both processes gone the ledger holds %+v (%v); want nothing", held, err)
	}
}

// processGone reports whether pid has exited (a zombie has too).
func processGone(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X')
}
