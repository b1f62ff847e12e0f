package mergebench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcField reads a "Name:   123 kB" line of a /proc status-like file, in KiB.
func ProcField(path, name string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != name {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			return 0, false
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		return n, err == nil
	}
	return 0, false
}

// ResetPeakRSS resets this process's high-water resident set size (VmHWM)
// to its current RSS (Linux 4.0 and later), so the next PeakRSSKiB is the
// peak of what runs in between; elsewhere it does nothing.
func ResetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// PeakRSSKiB is this process's high-water resident set size (VmHWM).
func PeakRSSKiB() (int64, error) {
	n, ok := ProcField("/proc/self/status", "VmHWM")
	if !ok {
		return 0, fmt.Errorf("read VmHWM from /proc/self/status: not available")
	}
	return n, nil
}
