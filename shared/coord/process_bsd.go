//go:build unix && !linux

package coord

// machineID returns nothing outside Linux: a Process is identified by its
// host and pid only.
func machineID() (boot, pidns string) { return "", "" }

// probeProcess reports whether a process has pid; its start time is not
// known outside Linux, so a reused pid keeps a lease until it expires.
func probeProcess(pid int) (procState, bool) {
	exists, ok := pidExists(pid)
	return procState{running: exists}, ok
}
