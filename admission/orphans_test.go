//go:build linux

package admission

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	if err != nil || len(reaped.Stopped) != 1 || reaped.Stopped[0].ID != "crashed" {
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
	if err != nil || len(reaped.Stopped) != 0 {
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

// sleeper is a process the test started, standing for a llama-server or a
// bystander; exited closes once it has been waited for.
type sleeper struct {
	pid    int
	exited chan struct{}
}

// startSleeper starts `sleep 60`, leading a process group of its own when
// own is set, else in the test's group. It is killed at the end.
func startSleeper(t *testing.T, own bool) sleeper {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if own {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep to stand for a process:", err)
	}
	s := sleeper{pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-s.exited })
	return s
}

// startGroupMember starts a shell leading a new process group with a
// `sleep 60` in it, and returns the shell and the sleep (a member that
// leads nothing). The group is killed at the end.
func startGroupMember(t *testing.T) (leader, member sleeper) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 60 & echo $!; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skip("no sh to make a process group:", err)
	}
	leader = sleeper{pid: cmd.Process.Pid, exited: make(chan struct{})}
	line, _ := bufio.NewReader(out).ReadString('\n')
	go func() { cmd.Wait(); close(leader.exited) }()
	t.Cleanup(func() { syscall.Kill(-leader.pid, syscall.SIGKILL); <-leader.exited })
	var pid int
	if _, err := fmt.Sscan(line, &pid); err != nil || pid <= 0 {
		t.Fatalf("the shell printed %q; want the id of its sleep", line)
	}
	// The member is the shell's child, not the test's: it is alive while
	// the id answers and is no zombie.
	member = sleeper{pid: pid}
	return leader, member
}

func (s sleeper) alive() bool {
	if s.exited != nil {
		select {
		case <-s.exited:
			return false
		default:
		}
	}
	return processAlive(s.pid)
}

// TestReapForgedBooking replays the forged and stale bookings of issue
// #30: a booking naming a live process with its real start time and an
// unrelated process group made serve-api send that group SIGTERM then
// SIGKILL, and with the group left out it killed the process's own group.
// Now a group is signalled only when its leader is the booked process,
// proved by its start time, and the booking names that group or none;
// any other booking is dropped, said, and nothing is signalled.
func TestReapForgedBooking(t *testing.T) {
	tests := []struct {
		name string
		// make returns the booking's child, pgid and start time, the
		// processes that must survive, and whether the child must be
		// stopped (the genuine case).
		make func(t *testing.T) (child, pgid int, start uint64, spared []sleeper, stopped *sleeper)
		says string
	}{
		{"unrelated group named", func(t *testing.T) (int, int, uint64, []sleeper, *sleeper) {
			victim, bystander := startSleeper(t, true), startSleeper(t, true)
			return victim.pid, bystander.pid, startTime(victim.pid), []sleeper{victim, bystander}, nil
		}, "names process group"},
		{"group left out, process leads none", func(t *testing.T) (int, int, uint64, []sleeper, *sleeper) {
			victim := startSleeper(t, false)
			return victim.pid, 0, startTime(victim.pid), []sleeper{victim}, nil
		}, "instead of leading its own"},
		{"member named with its group", func(t *testing.T) (int, int, uint64, []sleeper, *sleeper) {
			leader, member := startGroupMember(t)
			return member.pid, leader.pid, startTime(member.pid), []sleeper{leader, member}, nil
		}, "names process group"},
		{"member named alone", func(t *testing.T) (int, int, uint64, []sleeper, *sleeper) {
			leader, member := startGroupMember(t)
			return member.pid, member.pid, startTime(member.pid), []sleeper{leader, member}, nil
		}, "instead of leading its own"},
		{"start time left out", func(t *testing.T) (int, int, uint64, []sleeper, *sleeper) {
			victim := startSleeper(t, true)
			return victim.pid, victim.pid, 0, []sleeper{victim}, nil
		}, "no start time"},
		{"genuine, group left out", func(t *testing.T) (int, int, uint64, []sleeper, *sleeper) {
			server := startSleeper(t, true)
			return server.pid, 0, startTime(server.pid), nil, &server
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			child, pgid, start, spared, stopped := tt.make(t)
			path := filepath.Join(t.TempDir(), "ledger.json")
			forged := ledgerFile{Bookings: []Booking{{ID: "forged", PID: deadPID(t), PIDStart: 1, Model: "m",
				ChildPID: child, ChildStart: start, ChildPGID: pgid, Need: map[string]int64{"gpu0": 1 << 30}, Started: true}}}
			data, _ := json.Marshal(forged)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			l := &Ledger{Path: path}
			reaped, err := l.Reap(context.Background(), 2*time.Second)
			if err != nil {
				t.Fatalf("Reap: %v", err)
			}
			time.Sleep(200 * time.Millisecond) // a signal, had one been sent, has landed
			for _, s := range spared {
				if !s.alive() {
					t.Errorf("process %d was killed by reaping a booking of process %d (group %d)", s.pid, child, pgid)
				}
			}
			if stopped != nil {
				if len(reaped.Stopped) != 1 || len(reaped.Dropped) != 0 || stopped.alive() {
					t.Errorf("genuine orphan: stopped %+v, dropped %+v, still alive %v; want it stopped", reaped.Stopped, reaped.Dropped, stopped.alive())
				}
			} else {
				if len(reaped.Stopped) != 0 || len(reaped.Dropped) != 1 || !strings.Contains(reaped.Dropped[0].Why, tt.says) {
					t.Errorf("Reap stopped %+v and dropped %+v; want nothing stopped and the booking dropped saying %q", reaped.Stopped, reaped.Dropped, tt.says)
				}
			}
			if held, err := l.Held(); err != nil || len(held) != 0 {
				t.Errorf("after Reap the ledger holds %+v (%v); want the booking gone", held, err)
			}
		})
	}
}
