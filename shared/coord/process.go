package coord

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Process identifies an operating-system process well enough to tell, from
// another process on the same machine, whether it still runs. The local
// backend records the Process of a lease's holder so that a run on the same
// host can take over the lease of a process that was killed, instead of
// waiting for it to expire.
//
// A pid means something only on its machine and in its pid namespace, and
// it is reused once its process is gone. So a holder is judged gone only when
// Host, Boot and PIDNS are this process's own, and then when no process has
// the pid, or the process that has it is a zombie or started at another time
// than Start. Anything else, a process on another host included, holds its
// lease until it expires.
//
// On Linux every field is filled (Start is field 22 of /proc/<pid>/stat,
// starttime, in clock ticks after boot). On other Unix systems Boot, PIDNS
// and Start are empty, and a holder is gone when kill(pid, 0) finds no
// process: a pid reused by another process keeps the lease until it expires.
// Elsewhere (Windows) liveness is not checked at all.
type Process struct {
	Host  string `json:"host,omitempty"`  // os.Hostname
	Boot  string `json:"boot,omitempty"`  // Linux boot id: two machines may share a host name
	PIDNS string `json:"pidns,omitempty"` // Linux pid namespace: containers may share a host name
	PID   int    `json:"pid,omitempty"`
	Start uint64 `json:"start,omitempty"` // Linux: start time in clock ticks after boot
}

// String returns "host/pid".
func (p Process) String() string {
	return fmt.Sprintf("%s/%d", p.Host, p.PID)
}

// CurrentProcess returns the identity of the calling process. Fields it
// cannot read are left empty, which only makes takeovers rarer.
func CurrentProcess() Process {
	host, _ := os.Hostname()
	p := Process{Host: host, PID: os.Getpid()}
	p.Boot, p.PIDNS = machineID()
	if st, ok := probeProcess(p.PID); ok {
		p.Start = st.start
	}
	return p
}

// procState is what a probe of a pid found.
type procState struct {
	running bool   // a process has the pid and is not a zombie
	start   uint64 // its start time, 0 when unknown
}

// goneFrom reports whether p, a lease holder's process, no longer exists,
// judged by self, the process looking; probe looks a pid up on this machine
// and reports ok false when it cannot tell.
func (p Process) goneFrom(self Process, probe func(pid int) (procState, bool)) bool {
	if p.Host == "" || p.PID <= 0 || p.Host != self.Host || p.Boot != self.Boot || p.PIDNS != self.PIDNS {
		return false // unknown, or another machine: its pids mean nothing here
	}
	st, ok := probe(p.PID)
	switch {
	case !ok:
		return false
	case !st.running:
		return true
	case p.Start != 0 && st.start != 0 && p.Start != st.start:
		return true // the pid was reused by a process started later
	}
	return false
}

// parseStat returns the state (field 3) and starttime (field 22) of a
// /proc/<pid>/stat line (proc(5)). Field 2, the command name in
// parentheses, may itself hold spaces and parentheses, so fields are
// counted from the last ')'.
func parseStat(data []byte) (state byte, start uint64, err error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("parse /proc stat %q: no command name", data)
	}
	f := strings.Fields(string(data[i+1:]))
	const stateField, startField = 3, 22 // 1-based, as proc(5) numbers them
	if len(f) < startField-stateField+1 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("parse /proc stat %q: too few fields", data)
	}
	start, err = strconv.ParseUint(f[startField-stateField], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("parse /proc stat starttime: %w", err)
	}
	return f[0][0], start, nil
}
