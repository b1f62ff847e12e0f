//go:build unix

package coord

import (
	"errors"
	"math"
	"syscall"
)

// pidExists reports whether a process has pid, with kill(pid, 0), which also
// sees processes of other users; ok is false when it cannot tell.
func pidExists(pid int) (exists, ok bool) {
	if pid <= 0 || pid > math.MaxInt32 {
		return false, true // no process can have it
	}
	switch err := syscall.Kill(pid, 0); {
	case err == nil, errors.Is(err, syscall.EPERM):
		return true, true
	case errors.Is(err, syscall.ESRCH):
		return false, true
	}
	return false, false
}
