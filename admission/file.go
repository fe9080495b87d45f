package admission

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// ledgerFile is the shared ledger's content.
type ledgerFile struct {
	About    string    `json:"about"`
	Bookings []Booking `json:"bookings"`
}

const ledgerAbout = "memory booked by the models headroom runs on this machine; rewritten under a file lock by every admission"

// updateFile applies f to the bookings in path under an exclusive file
// lock, dropping bookings of processes that no longer run.
func updateFile(path string, f func([]Booking) ([]Booking, error)) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("admission ledger: %w", err)
	}
	file, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("admission ledger: %w", err)
	}
	defer file.Close()
	if err := lockFile(file); err != nil {
		return fmt.Errorf("admission ledger %s: locking: %w", path, err)
	}
	defer unlockFile(file)
	data, err := io.ReadAll(file)
	if err != nil {
		return fmt.Errorf("admission ledger %s: %w", path, err)
	}
	var lf ledgerFile
	if len(data) > 0 {
		if err := json.Unmarshal(data, &lf); err != nil {
			return fmt.Errorf("admission ledger %s: expected JSON bookings: %w (delete the file if no headroom process runs)", path, err)
		}
	}
	live := slices.DeleteFunc(lf.Bookings, func(b Booking) bool { return !processAlive(b.PID) })
	bs, err := f(live)
	if err != nil {
		return err
	}
	out, err := json.MarshalIndent(ledgerFile{About: ledgerAbout, Bookings: bs}, "", "  ")
	if err != nil {
		return err
	}
	// Rewritten in place under the lock: a rename would leave other
	// processes locking the old file.
	if err := file.Truncate(0); err != nil {
		return fmt.Errorf("admission ledger %s: %w", path, err)
	}
	if _, err := file.WriteAt(append(out, '\n'), 0); err != nil {
		return fmt.Errorf("admission ledger %s: %w", path, err)
	}
	return file.Sync()
}
