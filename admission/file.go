package admission

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ledgerFile is the shared ledger's content.
type ledgerFile struct {
	About    string    `json:"about"`
	Bookings []Booking `json:"bookings"`
}

const ledgerAbout = "memory booked by the models headroom runs on this machine; replaced atomically under the lock file beside it by every admission"

// maxLedgerBytes bounds the ledger read: thousands of bookings fit in it,
// and a file grown past it is not one headroom wrote.
const maxLedgerBytes = 16 << 20

// maxNeed bounds one domain's booking: no machine has a pebibyte of memory,
// so a larger figure is a corrupt or forged booking.
const maxNeed = 1 << 50

// Stages of a rewrite at which a test may stop the process (see
// Ledger.stage): the temporary file half written, written and synced, and
// renamed into place.
const (
	stageHalfWritten = "half-written"
	stageSynced      = "synced"
	stageRenamed     = "renamed"
)

// updateFile applies f to the bookings in path under an exclusive lock on
// path+".lock", dropping bookings whose processes are all gone, and
// replaces path with the result atomically: written to a temporary file in
// the same directory, synced, renamed over path, and the directory synced.
// A process killed at any point leaves either the old ledger or the new
// one, never a truncated one. The lock lives in its own file because the
// rename replaces the ledger's inode, and a lock on the old inode would
// not exclude a process that opened the new one.
func updateFile(path string, stage func(string), f func(live, dropped []Booking) ([]Booking, error)) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("admission ledger: %w", err)
	}
	// The ledger lives in the model store, which follows no links: a
	// link planted at the lock would have it created or opened elsewhere.
	lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE|noFollow, 0o644)
	if err != nil {
		return fmt.Errorf("admission ledger: opening its lock (a symbolic link there is refused): %w", err)
	}
	defer lock.Close()
	if err := lockFile(lock); err != nil {
		return fmt.Errorf("admission ledger %s: locking %s: %w", path, lock.Name(), err)
	}
	defer unlockFile(lock)
	// Under the lock no rewrite is under way: a temporary file is what a
	// killed writer left.
	if stale, err := filepath.Glob(filepath.Join(dir, "."+filepath.Base(path)+".*.tmp")); err == nil {
		for _, name := range stale {
			os.Remove(name)
		}
	}
	bs, err := readLedger(path)
	if err != nil {
		return err
	}
	var live, dropped []Booking
	for _, b := range bs {
		if b.alive() {
			live = append(live, b)
		} else {
			dropped = append(dropped, b)
		}
	}
	out, err := f(live, dropped)
	if err != nil {
		return err
	}
	for _, b := range out {
		if err := b.validate(); err != nil {
			return fmt.Errorf("admission ledger %s: refusing to write %w", path, err)
		}
	}
	data, err := json.MarshalIndent(ledgerFile{About: ledgerAbout, Bookings: out}, "", "  ")
	if err != nil {
		return err
	}
	return replaceFile(path, append(data, '\n'), stage)
}

// readLedger reads and checks the bookings; a missing file holds none.
func readLedger(path string) ([]Booking, error) {
	file, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("admission ledger: %w", err)
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, maxLedgerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("admission ledger %s: %w", path, err)
	}
	if len(data) > maxLedgerBytes {
		return nil, fmt.Errorf("admission ledger %s: expected at most %d bytes, found more (delete the file if no headroom process runs)", path, maxLedgerBytes)
	}
	if len(data) == 0 {
		// Only a writer that did not rename could leave this; headroom's
		// never does, so refuse rather than admit against nothing.
		return nil, fmt.Errorf("admission ledger %s: expected JSON bookings, found an empty file (delete it if no headroom process runs)", path)
	}
	var lf ledgerFile
	if err := json.Unmarshal(data, &lf); err != nil {
		return nil, fmt.Errorf("admission ledger %s: expected JSON bookings: %w (delete the file if no headroom process runs)", path, err)
	}
	for _, b := range lf.Bookings {
		if err := b.validate(); err != nil {
			// Dropping the booking would admit against memory that may be
			// in use; trusting it could do the same with a negative need.
			return nil, fmt.Errorf("admission ledger %s: %w (fix or delete the file if no headroom process runs)", path, err)
		}
	}
	return lf.Bookings, nil
}

// validate refuses a booking that could not have come from an admission:
// no id or process, or a need that is negative (it would free memory that
// others hold) or beyond any machine.
func (b Booking) validate() error {
	switch {
	case b.ID == "":
		return fmt.Errorf("booking of %q: expected an id, found none", b.Model)
	case b.PID <= 0:
		return fmt.Errorf("booking %s: expected the process id of its headroom, found %d", b.ID, b.PID)
	case b.ChildPID < 0 || b.ChildPGID < 0:
		return fmt.Errorf("booking %s: expected llama-server's process id and group to be positive or absent, found %d and %d", b.ID, b.ChildPID, b.ChildPGID)
	}
	for d, n := range b.Need {
		if n < 0 || n > maxNeed {
			return fmt.Errorf("booking %s: expected its need in %s to be from 0 to %d bytes, found %d", b.ID, d, int64(maxNeed), n)
		}
	}
	return nil
}

// replaceFile writes data to path through a temporary file and a rename.
func replaceFile(path string, data []byte, stage func(string)) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("admission ledger %s: %w", path, err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	half := len(data) / 2
	if _, err := tmp.Write(data[:half]); err != nil {
		return fmt.Errorf("admission ledger %s: writing %s: %w", path, tmp.Name(), err)
	}
	stage(stageHalfWritten)
	if _, err := tmp.Write(data[half:]); err != nil {
		return fmt.Errorf("admission ledger %s: writing %s: %w", path, tmp.Name(), err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("admission ledger %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("admission ledger %s: syncing %s: %w", path, tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("admission ledger %s: %w", path, err)
	}
	stage(stageSynced)
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("admission ledger %s: replacing it: %w", path, err)
	}
	done = true
	stage(stageRenamed)
	return syncDir(filepath.Dir(path))
}
