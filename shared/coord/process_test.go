package coord

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

func TestProcessGoneFrom(t *testing.T) {
	self := Process{Host: "h", Boot: "b", PIDNS: "pid:[1]", PID: 10, Start: 500}
	holder := Process{Host: "h", Boot: "b", PIDNS: "pid:[1]", PID: 20, Start: 700}
	running := func(start uint64) func(int) (procState, bool) {
		return func(int) (procState, bool) { return procState{running: true, start: start}, true }
	}
	noProcess := func(int) (procState, bool) { return procState{}, true }
	cannotTell := func(int) (procState, bool) { return procState{}, false }
	with := func(edit func(*Process)) Process {
		p := holder
		edit(&p)
		return p
	}
	for _, tc := range []struct {
		name   string
		holder Process
		probe  func(int) (procState, bool)
		gone   bool
	}{
		{"a holder whose pid has no process is gone", holder, noProcess, true},
		{"a holder whose pid has a process started at another time is gone", holder, running(701), true},
		{"a holder whose pid has a process started at its start is alive", holder, running(700), false},
		{"a holder without a start time is alive while its pid runs", with(func(p *Process) { p.Start = 0 }), running(701), false},
		{"a holder is alive when the probe cannot tell", holder, cannotTell, false},
		{"a holder on another host is never gone", with(func(p *Process) { p.Host = "other" }), noProcess, false},
		{"a holder of another boot (a machine with the same name) is never gone", with(func(p *Process) { p.Boot = "c" }), noProcess, false},
		{"a holder in another pid namespace is never gone", with(func(p *Process) { p.PIDNS = "pid:[2]" }), noProcess, false},
		{"a holder with no recorded identity is never gone", Process{}, noProcess, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.holder.goneFrom(self, tc.probe); got != tc.gone {
				t.Fatalf("goneFrom = %v, want %v", got, tc.gone)
			}
		})
	}
}

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		state      byte
		start      uint64
	}{
		{"a plain command", "1234 (dsdelta) S 1 1234 1234 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 9 0 987654 1000 100\n", 'S', 987654},
		{"a command name with spaces and parentheses", "77 (a) b (c)) Z 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42 0 0", 'Z', 42},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, start, err := parseStat([]byte(tc.line))
			if err != nil || state != tc.state || start != tc.start {
				t.Fatalf("parseStat = %c %d %v, want %c %d", state, start, err, tc.state, tc.start)
			}
		})
	}
	if _, _, err := parseStat([]byte("12 (x) S 1 2")); err == nil {
		t.Fatal("a short line parsed")
	}
}

func TestCurrentProcessIsRunning(t *testing.T) {
	self := CurrentProcess()
	if self.Host == "" || self.PID != os.Getpid() {
		t.Fatalf("CurrentProcess = %+v, want this host and pid", self)
	}
	if runtime.GOOS == "linux" && (self.Boot == "" || self.PIDNS == "" || self.Start == 0) {
		t.Fatalf("CurrentProcess = %+v, want a boot id, pid namespace and start time on Linux", self)
	}
	if self.goneFrom(self, probeProcess) {
		t.Fatal("this process looks gone to itself")
	}
}

func TestProbeSeesAKilledChildAsGoneBeforeItIsReaped(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("zombies are told apart on Linux only")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep command: %v", err)
	}
	defer cmd.Wait()
	child, ok := probeProcess(cmd.Process.Pid)
	if !ok || !child.running || child.start == 0 {
		t.Fatalf("probe of a running child = %+v, %v; want running with a start time", child, ok)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, ok := probeProcess(cmd.Process.Pid)
		if ok && !st.running {
			return // a zombie until cmd.Wait reaps it, and gone already
		}
		if time.Now().After(deadline) {
			t.Fatalf("probe of a killed child = %+v, %v; want not running", st, ok)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
