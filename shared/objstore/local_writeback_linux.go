//go:build linux

package objstore

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing bytes [off, off+n) of f
// to disk without waiting for it (sync_file_range with
// SYNC_FILE_RANGE_WRITE), so that the fsync before a file is published
// finds most of it written already instead of writing it all at once.
// Errors are ignored: the fsync that follows is what guarantees
// durability.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
