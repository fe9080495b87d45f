//go:build unix

package admission

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/headroom-llm/headroom/synth"
)

// Two Ledgers on one file stand for two headroom processes: each sees the
// other's bookings.
func TestSharedLedgerFile(t *testing.T) {
	r, snap := accounting(t, synth.F16, "rtx-4090")
	path := filepath.Join(t.TempDir(), "ledger.json")
	first, second := &Ledger{Path: path}, &Ledger{Path: path}
	a, err := first.Admit("first", r, snap)
	if err != nil {
		t.Fatal(err)
	}
	var ref *Refusal
	if _, err := second.Admit("second", r, snap); !errors.As(err, &ref) {
		t.Fatalf("a second process's load beside the first: want a refusal, got %v", err)
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := second.Admit("second", r, snap); err != nil {
		t.Fatalf("after the first released: %v", err)
	}
	held, err := first.Held()
	if err != nil || len(held) != 1 || held[0].Model != "second" {
		t.Errorf("the first process sees %+v, %v; want the second's booking", held, err)
	}
}

func TestSharedLedgerDropsExitedProcesses(t *testing.T) {
	r, snap := accounting(t, synth.F16, "rtx-4090")
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no 'true' to make a dead process id:", err)
	}
	dead := cmd.Process.Pid
	path := filepath.Join(t.TempDir(), "ledger.json")
	stale := ledgerFile{Bookings: []Booking{{ID: "old", PID: dead, Model: "crashed", Need: map[string]int64{"gpu0": 20 << 30}, Started: true}}}
	data, _ := json.Marshal(stale)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	l := &Ledger{Path: path}
	if _, err := l.Admit("new", r, snap); err != nil {
		t.Fatalf("a booking of an exited process (pid %d) still held memory: %v", dead, err)
	}
}

func TestSharedLedgerConcurrent(t *testing.T) {
	r, snap := accounting(t, synth.Q4_K_M, "rtx-4090")
	want := capacityFor(t, r, snap)
	path := filepath.Join(t.TempDir(), "ledger.json")
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted int
		tickets  []*Ticket
	)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := &Ledger{Path: path} // each its own file handle and lock
			tk, err := l.Admit("m", r, snap)
			var ref *Refusal
			if err != nil && !errors.As(err, &ref) {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				admitted++
				tickets = append(tickets, tk)
			}
		}()
	}
	wg.Wait()
	if admitted != want {
		t.Errorf("50 concurrent admissions through one file: %d admitted, want %d", admitted, want)
	}
	// Releasing one booking leaves the others, whichever Ledger made them.
	if err := tickets[0].Release(); err != nil {
		t.Fatal(err)
	}
	if held, err := (&Ledger{Path: path}).Held(); err != nil || len(held) != admitted-1 {
		t.Errorf("after one release: %d held (%v), want %d", len(held), err, admitted-1)
	}
}

func TestSharedLedgerCorruptFile(t *testing.T) {
	r, snap := accounting(t, synth.Q4_K_M, "rtx-4090")
	path := filepath.Join(t.TempDir(), "ledger.json")
	os.WriteFile(path, []byte("{not json"), 0o644)
	if _, err := (&Ledger{Path: path}).Admit("m", r, snap); err == nil {
		t.Error("a corrupt ledger file was ignored; admitting blind could overcommit memory")
	}
}
