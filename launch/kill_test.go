//go:build linux

package launch

import (
	"bufio"
	"context"
	"encoding/json"
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

// TestReapOnlyWhatHeadroomStarted runs a llama-server as Load starts it
// and then edits its booking as a headroom killed without Pdeathsig would
// leave it (its own pid dead), first forged to name an unrelated process
// group: ReapOrphans must say it dropped the booking and signal nothing
// (the server and the group's process run on). Then, booked as Attach
// wrote it, the same server must be stopped, which also proves engine
// starts it as the leader of its own group.
func TestReapOnlyWhatHeadroomStarted(t *testing.T) {
	bin := enginetest.BuildFake(t)
	f, a, path := cpuMamba(t)
	ledger := &admission.Ledger{Path: filepath.Join(t.TempDir(), "ledger.json")}
	run, err := f.deps.Load(context.Background(), a, path, LoadOptions{Bin: bin, Ledger: ledger,
		ReadyTimeout: 20 * time.Second, Env: []string{"FAKE_LLAMA_MODE=good"}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Stop(context.Background())
	server := run.Server.PID()
	bystander := exec.Command("sleep", "60")
	bystander.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := bystander.Start(); err != nil {
		t.Skip("no sleep to stand for an unrelated process group:", err)
	}
	defer bystander.Process.Kill()
	held, err := ledger.Held()
	if err != nil || len(held) != 1 || held[0].ChildPID != server || held[0].ChildPGID != server {
		t.Fatalf("the ledger holds %+v (%v); want one booking naming llama-server %d as its group's leader", held, err, server)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip(err)
	}
	orphaned := held[0]
	orphaned.PID, orphaned.PIDStart = dead.Process.Pid, 1

	forged := orphaned
	forged.ChildPGID = bystander.Process.Pid
	rewriteLedger(t, ledger.Path, forged)
	var said []string
	say := func(format string, args ...any) { said = append(said, fmt.Sprintf(format, args...)) }
	ReapOrphans(context.Background(), ledger, say)
	time.Sleep(200 * time.Millisecond)
	if processGone(server) || processGone(bystander.Process.Pid) {
		t.Fatalf("reaping a booking forged to name group %d: llama-server gone %v, the group's process gone %v; want both running",
			bystander.Process.Pid, processGone(server), processGone(bystander.Process.Pid))
	}
	if len(said) != 1 || !strings.Contains(said[0], "dropped booking "+forged.ID) || !strings.Contains(said[0], "without signalling") {
		t.Errorf("ReapOrphans said %q; want one line saying the forged booking was dropped without a signal", said)
	}

	rewriteLedger(t, ledger.Path, orphaned)
	said = nil
	ReapOrphans(context.Background(), ledger, say)
	if !processGone(server) || processGone(bystander.Process.Pid) {
		t.Fatalf("reaping the genuine booking: llama-server gone %v, the unrelated process gone %v; want only the server gone",
			processGone(server), processGone(bystander.Process.Pid))
	}
	if len(said) != 1 || !strings.Contains(said[0], fmt.Sprintf("stopped llama-server %d", server)) {
		t.Errorf("ReapOrphans said %q; want one line saying llama-server %d was stopped", said, server)
	}
}

// rewriteLedger replaces the bookings of the ledger at path with bs, as
// anything that can write the file can.
func rewriteLedger(t *testing.T, path string, bs ...admission.Booking) {
	t.Helper()
	data, err := json.Marshal(map[string]any{"bookings": bs})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
