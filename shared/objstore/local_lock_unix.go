//go:build unix

package objstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// lockCurrent takes an exclusive flock on the file currently at p and returns
// its stat, or a nil stat (and no lock) when p holds no regular file. Writers
// replace the file by rename, so after the lock is granted the file may no
// longer be the one at p; then the lock is retried on the new file. The
// returned function releases the lock.
func lockCurrent(p string) (unlock func(), cur fs.FileInfo, err error) {
	for {
		f, err := os.Open(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return func() {}, nil, nil
			}
			return nil, nil, err
		}
		if err := flock(f, syscall.LOCK_EX); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("lock: %w", err)
		}
		release := func() {
			_ = flock(f, syscall.LOCK_UN)
			f.Close()
		}
		locked, err := f.Stat()
		if err != nil {
			release()
			return nil, nil, err
		}
		now, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			release() // deleted while we waited
			return func() {}, nil, nil
		}
		if err != nil {
			release()
			return nil, nil, err
		}
		if !os.SameFile(locked, now) {
			release() // replaced while we waited: lock the new file
			continue
		}
		if !now.Mode().IsRegular() {
			release()
			return func() {}, nil, nil
		}
		return release, now, nil
	}
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
