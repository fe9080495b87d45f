//go:build unix

package admission

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-llm/headroom/synth"
)

// TestLedgerSurvivesKill fills the ledger with as many models as the GPU
// holds, then SIGKILLs a headroom at each stage of a rewrite. Every time,
// the ledger must still hold every booking, and one more model must be
// refused: an in-place rewrite killed between its truncate and its write
// left an empty ledger, after which three more models were admitted.
func TestLedgerSurvivesKill(t *testing.T) {
	r, snap := accounting(t, synth.Q4_K_M, "rtx-4090")
	fit := capacityFor(t, r, snap)
	path := filepath.Join(t.TempDir(), "ledger.json")
	l := &Ledger{Path: path}
	for i := range fit {
		if _, err := l.Admit("resident", r, snap); err != nil {
			t.Fatalf("admission %d of %d: %v", i+1, fit, err)
		}
	}
	for _, stage := range []string{stageHalfWritten, stageSynced, stageRenamed} {
		t.Run(stage, func(t *testing.T) {
			killAt(t, stage, path)
			held, err := readLedger(path)
			if err != nil {
				t.Fatalf("after a kill at %s the ledger is unreadable: %v", stage, err)
			}
			resident := 0
			for _, b := range held {
				if b.Model == "resident" {
					resident++
				}
			}
			if resident != fit {
				t.Fatalf("after a kill at %s the ledger holds %d of the %d bookings", stage, resident, fit)
			}
			admitted := 0
			for range 3 {
				var ref *Refusal
				tk, err := (&Ledger{Path: path}).Admit("intruder", r, snap)
				if err == nil {
					admitted++
					tk.Release()
				} else if !errors.As(err, &ref) {
					t.Fatal(err)
				}
			}
			if admitted != 0 {
				t.Errorf("after a kill at %s, %d more models were admitted beside %d that fill the GPU", stage, admitted, fit)
			}
			if tmp, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*.tmp")); len(tmp) != 0 {
				t.Errorf("the killed writer's temporary files outlived the next rewrite: %v", tmp)
			}
		})
	}
}

// killAt runs a headroom that rewrites the ledger at path and SIGKILLs it
// once it reports the stage.
func killAt(t *testing.T, stage, path string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HEADROOM_LEDGER_CHILD="+stage, "HEADROOM_LEDGER_PATH="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if strings.TrimSpace(s) != "at "+stage {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the child said %q, want %q", s, "at "+stage)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child did not reach %s in 20 s", stage)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
}

// TestLedgerRefusesForgedBookings: a booking with a negative need would
// free memory others hold; one beyond any machine, or without a process,
// was not written by an admission. The ledger refuses to admit against
// either rather than trust or silently drop it.
func TestLedgerRefusesForgedBookings(t *testing.T) {
	r, snap := accounting(t, synth.Q4_K_M, "rtx-4090")
	me := os.Getpid()
	tests := []struct {
		name string
		b    Booking
		says string
	}{
		{"negative need", Booking{ID: "neg", PID: me, Need: map[string]int64{"gpu0": -40 << 30}}, "found -42949672960"},
		{"absurd need", Booking{ID: "huge", PID: me, Need: map[string]int64{"gpu0": 1 << 60}}, "from 0 to"},
		{"no process", Booking{ID: "nopid", PID: 0, Need: map[string]int64{"gpu0": 1}}, "process id"},
		{"negative child", Booking{ID: "child", PID: me, ChildPID: -1}, "positive"},
		{"no id", Booking{PID: me}, "expected an id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.json")
			data, _ := json.Marshal(ledgerFile{Bookings: []Booking{tt.b}})
			os.WriteFile(path, data, 0o644)
			_, err := (&Ledger{Path: path}).Admit("m", r, snap)
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("admitting beside %+v: %v; want a refusal saying %q", tt.b, err, tt.says)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "ledger.json")
	os.WriteFile(path, nil, 0o644)
	if _, err := (&Ledger{Path: path}).Admit("m", r, snap); err == nil || !strings.Contains(err.Error(), "empty file") {
		t.Errorf("admitting against an empty ledger: %v; want a refusal", err)
	}
}

// TestLedgerLockLink: a link planted at ledger.json.lock, pointing out of
// the store, made every admission create or open the file it names. It is
// refused, and nothing appears outside.
func TestLedgerLockLink(t *testing.T) {
	r, snap := accounting(t, synth.Q4_K_M, "rtx-4090")
	dir, outside := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "ledger.json")
	if err := os.Symlink(filepath.Join(outside, "planted"), path+".lock"); err != nil {
		t.Fatal(err)
	}
	_, err := (&Ledger{Path: path}).Admit("m", r, snap)
	if err == nil || !strings.Contains(err.Error(), path+".lock") {
		t.Errorf("admitting with a link at the ledger's lock: %v; want a refusal naming it", err)
	}
	if es, _ := os.ReadDir(outside); len(es) != 0 {
		t.Errorf("a file appeared outside the store: %v", es)
	}
}
