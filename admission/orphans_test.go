//go:build linux

package admission

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/synth"
)

// deadPID is the id of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no 'true' to make a dead process id:", err)
	}
	return cmd.Process.Pid
}

// TestOrphanKeepsBooking is a headroom killed with its llama-server left
// running: the booking must hold the server's memory until the server is
// gone too, and Reap must end the server (by its process group) so the
// memory comes back. Before, the booking was dropped with headroom's pid
// and six models ran where three fit.
func TestOrphanKeepsBooking(t *testing.T) {
	r, snap := accounting(t, synth.Q4_K_M, "rtx-4090")
	fit := capacityFor(t, r, snap)
	// The orphaned llama-server: a process in a group of its own.
	orphan := exec.Command("sleep", "60")
	orphan.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := orphan.Start(); err != nil {
		t.Skip("no sleep to stand for llama-server:", err)
	}
	exited := make(chan struct{})
	go func() { orphan.Wait(); close(exited) }()
	t.Cleanup(func() { orphan.Process.Kill(); <-exited })
	pid := orphan.Process.Pid

	// The crashed headroom booked the whole GPU for it.
	a, err := r.Against(snap)
	if err != nil {
		t.Fatal(err)
	}
	need := map[string]int64{}
	for _, d := range a.Domains {
		if d.Required > 0 {
			need[d.ID] = d.Required * int64(fit)
		}
	}
	path := filepath.Join(t.TempDir(), "ledger.json")
	stale := ledgerFile{Bookings: []Booking{{ID: "crashed", PID: deadPID(t), PIDStart: 1, Model: "left behind",
		ChildPID: pid, ChildStart: startTime(pid), ChildPGID: pid, Need: need, Started: true}}}
	data, _ := json.Marshal(stale)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	l := &Ledger{Path: path}
	var ref *Refusal
	if _, err := l.Admit("new", r, snap); !errors.As(err, &ref) {
		t.Fatalf("beside a running llama-server whose headroom was killed: %v; want a refusal", err)
	}

	start := time.Now()
	reaped, err := l.Reap(context.Background(), 2*time.Second)
	took := time.Since(start)
	if err != nil || len(reaped) != 1 || reaped[0].ID != "crashed" {
		t.Fatalf("Reap: %v, %v; want the crashed booking", reaped, err)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the orphaned llama-server still runs 5 s after Reap")
	}
	if took > 3*time.Second {
		t.Errorf("Reap took %v to end a server that stops on SIGTERM; want under 3 s", took)
	}
	admitted := 0
	for range fit + 2 {
		if _, err := l.Admit("new", r, snap); err == nil {
			admitted++
		}
	}
	if admitted != fit {
		t.Errorf("after the reap %d models were admitted, want %d (what the GPU holds)", admitted, fit)
	}
}

// TestReapSparesReusedPID: a booking whose llama-server id now belongs to
// another process (another start time) is not the server, and is neither
// signalled nor held.
func TestReapSparesReusedPID(t *testing.T) {
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Skip(err)
	}
	exited := make(chan struct{})
	go func() { other.Wait(); close(exited) }()
	t.Cleanup(func() { other.Process.Kill(); <-exited })
	pid := other.Process.Pid
	path := filepath.Join(t.TempDir(), "ledger.json")
	stale := ledgerFile{Bookings: []Booking{{ID: "old", PID: deadPID(t), Model: "gone",
		ChildPID: pid, ChildStart: startTime(pid) + 12345, ChildPGID: pid, Need: map[string]int64{"gpu0": 1 << 30}}}}
	data, _ := json.Marshal(stale)
	os.WriteFile(path, data, 0o644)
	l := &Ledger{Path: path}
	reaped, err := l.Reap(context.Background(), time.Second)
	if err != nil || len(reaped) != 0 {
		t.Errorf("Reap of a reused id: %v, %v; want nothing", reaped, err)
	}
	select {
	case <-exited:
		t.Fatal("Reap killed a process that only reused the booked id")
	case <-time.After(200 * time.Millisecond):
	}
	if held, err := l.Held(); err != nil || len(held) != 0 {
		t.Errorf("a booking whose processes are gone is still held: %+v, %v", held, err)
	}
}
