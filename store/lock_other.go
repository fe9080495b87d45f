//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/headroom-llm/headroom/internal/httpretry"
)

const (
	// lockPoll is how often a waiting pull tries the lock again.
	lockPoll = 100 * time.Millisecond
	// lockStale is how long a lock file may go untouched before it is
	// taken for the leftover of a holder that died; holders touch it four
	// times as often.
	lockStale = time.Minute
)

// acquire takes an exclusive lock by creating path with O_EXCL, waiting
// while it exists; onWait is called once if it must wait. Without flock,
// nothing frees the lock of a holder that died, so the holder keeps the
// file fresh and a file left untouched for lockStale is removed.
func (s *Store) acquire(ctx context.Context, path string, onWait func()) (release func(), err error) {
	for waited := false; ; {
		f, err := s.openFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			_ = f.Close()
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				t := time.NewTicker(lockStale / 4)
				defer t.Stop()
				for {
					select {
					case <-stop:
						return
					case now := <-t.C:
						_ = s.chtimes(path, now)
					}
				}
			}()
			return func() {
				close(stop)
				<-done
				_ = s.remove(path)
			}, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if fi, err := s.lstat(path); err == nil && time.Since(fi.ModTime()) > lockStale {
			_ = s.remove(path)
			continue
		}
		if !waited {
			waited = true
			onWait()
		}
		if err := httpretry.Sleep(ctx, lockPoll); err != nil {
			return nil, err
		}
	}
}
