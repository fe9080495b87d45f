package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// TestReadOnlyStore: a pull into a read-only store said "waiting for
// another download of it: ... read-only file system", as if another pull
// held the file. It now says the store is read-only. Run as root (where
// permissions are not enforced), the store is made read-only by a
// read-only bind mount in a mount namespace of the test's own thread;
// otherwise by taking the write permission off its directories, and the
// store is then "not writable by this user".
func TestReadOnlyStore(t *testing.T) {
	data := randomBytes(62, fileSize)
	o := &origin{files: map[string][]byte{"/m.gguf": data}}
	srv := serve(t, o)
	s := testStore(t)
	a := oneFile(srv, "/m.gguf", data)

	var err error
	want := "not writable by this user"
	if os.Geteuid() == 0 {
		want = "read-only"
		done := make(chan error, 1)
		skip := make(chan string, 1)
		go func() {
			// Never unlocked: the thread, and the namespace with it, ends
			// with this goroutine.
			runtime.LockOSThread()
			if err := syscall.Unshare(syscall.CLONE_NEWNS); err != nil {
				skip <- "running as root, and no mount namespace to make the store read-only in: " + err.Error()
				return
			}
			for _, m := range []struct {
				src, dst string
				flags    uintptr
			}{
				{"", "/", syscall.MS_PRIVATE | syscall.MS_REC},
				{s.Root, s.Root, syscall.MS_BIND | syscall.MS_REC},
				{"", s.Root, syscall.MS_REMOUNT | syscall.MS_BIND | syscall.MS_RDONLY},
			} {
				if err := syscall.Mount(m.src, m.dst, "", m.flags, ""); err != nil {
					skip <- "running as root, and the store could not be mounted read-only: " + err.Error()
					return
				}
			}
			_, err := s.Pull(context.Background(), a)
			done <- err
		}()
		select {
		case why := <-skip:
			t.Skip(why)
		case err = <-done:
		}
	} else {
		var dirs []string
		filepath.WalkDir(s.Root, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for _, d := range dirs {
			os.Chmod(d, 0o555)
		}
		t.Cleanup(func() {
			for _, d := range dirs {
				os.Chmod(d, 0o755)
			}
		})
		_, err = s.Pull(context.Background(), a)
	}
	if err == nil || !strings.Contains(err.Error(), "the store at "+s.Root+" is "+want) || strings.Contains(err.Error(), "waiting for another download") {
		t.Errorf("pull into a store that cannot be written: %v; want it to say the store at %s is %s", err, s.Root, want)
	}
	t.Logf("pull into a store that cannot be written: %v", err)
	if errors.Is(err, context.Canceled) {
		t.Errorf("the error reads as an interrupted wait: %v", err)
	}
	if requests, _, _ := o.stats(); requests != 0 {
		t.Errorf("%d requests into a store that cannot be written; want none", requests)
	}
}
