package coord

import (
	"os"
	"strconv"
	"strings"
)

// machineID returns the boot id and the pid namespace of this process, the
// parts of a Process that say which machine its pid belongs to.
func machineID() (boot, pidns string) {
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		boot = strings.TrimSpace(string(b))
	}
	pidns, _ = os.Readlink("/proc/self/ns/pid")
	return boot, pidns
}

// probeProcess looks pid up. kill(pid, 0) decides whether a process has the
// pid at all (it also sees processes /proc hides from other users, as with
// hidepid); /proc/<pid>/stat then gives its state and start time.
func probeProcess(pid int) (procState, bool) {
	if exists, ok := pidExists(pid); !exists || !ok {
		return procState{}, ok
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		// Hidden from us, or gone meanwhile: the next look will tell.
		return procState{running: true}, true
	}
	state, start, err := parseStat(data)
	if err != nil {
		return procState{}, false
	}
	// A zombie has exited and only waits for its parent to reap it.
	return procState{running: state != 'Z' && state != 'X', start: start}, true
}
