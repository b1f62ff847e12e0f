//go:build !linux

package emuproc

import (
	"errors"
	"fmt"
)

// PeakRSS reports the command's peak resident memory on Linux only, from
// /proc; here it returns an error wrapping errors.ErrUnsupported.
func (p *Process) PeakRSS() (int64, error) {
	return 0, fmt.Errorf("peak RSS of %s: %w", p.name, errors.ErrUnsupported)
}
