//go:build !unix

package coord

// machineID returns nothing: a Process is identified by its host and pid.
func machineID() (boot, pidns string) { return "", "" }

// probeProcess cannot tell whether a process runs on this system, so a
// lease is never taken over from its holder: it expires.
func probeProcess(int) (procState, bool) { return procState{}, false }
