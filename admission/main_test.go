package admission

import (
	"fmt"
	"os"
	"testing"
)

// TestMain doubles as a headroom that rewrites the ledger and stops at a
// stage of the rewrite, for the tests that kill it there (see
// TestLedgerSurvivesKill): HEADROOM_LEDGER_CHILD names the stage and
// HEADROOM_LEDGER_PATH the file.
func TestMain(m *testing.M) {
	if stage := os.Getenv("HEADROOM_LEDGER_CHILD"); stage != "" {
		os.Exit(ledgerChild(stage, os.Getenv("HEADROOM_LEDGER_PATH")))
	}
	os.Exit(m.Run())
}

func ledgerChild(stop, path string) int {
	l := &Ledger{Path: path, stage: func(s string) {
		if s == stop {
			fmt.Println("at " + s)
			select {} // until killed
		}
	}}
	err := l.update(func(bs []Booking) ([]Booking, error) {
		return append(bs, Booking{ID: "child", PID: os.Getpid(), Model: "child", Need: map[string]int64{"gpu0": 1 << 20}}), nil
	})
	fmt.Println("finished without stopping:", err)
	return 1
}
