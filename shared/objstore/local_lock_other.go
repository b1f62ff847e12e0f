//go:build !unix

package objstore

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// lockCurrent returns the stat of the regular file at p, or nil when there is
// none. Without flock there is no lock: IfGenerationMatch is checked but the
// check and the rename are not atomic against concurrent writers.
func lockCurrent(p string) (unlock func(), cur fs.FileInfo, err error) {
	st, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return func() {}, nil, nil
		}
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return func() {}, nil, nil
	}
	return func() {}, st, nil
}
