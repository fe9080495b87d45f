//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/headroom-llm/headroom/internal/httpretry"
)

// lockPoll is how often a waiting pull tries the lock again.
const lockPoll = 100 * time.Millisecond

// acquire takes an exclusive flock on path, waiting while another holder
// has it; onWait is called once if it must wait. The kernel drops the lock
// when its holder dies, so a crash leaves no stale lock. Polling instead of
// a blocking flock keeps the wait cancellable by ctx.
func (s *Store) acquire(ctx context.Context, path string, onWait func()) (release func(), err error) {
	f, err := s.openFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock %s: %w", path, err)
	}
	fd := int(f.Fd())
	for waited := false; ; {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(fd, syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !waited {
			waited = true
			onWait()
		}
		if err := httpretry.Sleep(ctx, lockPoll); err != nil {
			_ = f.Close()
			return nil, err
		}
	}
}
