//go:build linux

package emuproc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// PeakRSS returns the most memory the command has held resident since it
// started, in bytes: the kernel's high-water mark (VmHWM), which catches a
// peak between two samples. It fails once the command has exited, so read
// it before Stop. Where the kernel does not report it the error wraps
// errors.ErrUnsupported.
func (p *Process) PeakRSS() (int64, error) {
	path := "/proc/" + strconv.Itoa(p.Pid()) + "/status"
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("peak RSS of %s: %w", p.name, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// "VmHWM:	  123456 kB"
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		kb, ok := strings.CutSuffix(strings.TrimSpace(rest), " kB")
		n, err := strconv.ParseInt(strings.TrimSpace(kb), 10, 64)
		if !ok || err != nil {
			return 0, fmt.Errorf("peak RSS of %s: unreadable %s line %q", p.name, path, sc.Text())
		}
		return n << 10, nil
	}
	// Kernel threads and zombies have no memory lines.
	return 0, fmt.Errorf("peak RSS of %s: no VmHWM in %s (has it exited?)", p.name, path)
}
