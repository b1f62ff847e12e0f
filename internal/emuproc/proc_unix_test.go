//go:build unix

package emuproc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a parent that starts a process
// and then waits to be killed.
const helperEnv = "EMUPROC_TEST_HELPER"

// holdEnv makes the test binary hold the number of MiB it names resident
// until it is killed.
const holdEnv = "EMUPROC_TEST_HOLD_MIB"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		helperParent()
		return
	}
	if mib, err := strconv.Atoi(os.Getenv(holdEnv)); err == nil {
		holdMemory(mib)
		return
	}
	os.Exit(m.Run())
}

// holdMemory touches every page of mib MiB, so that they are resident,
// prints "ready" and keeps them until it is killed.
func holdMemory(mib int) {
	b := make([]byte, mib<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	fmt.Println("ready")
	for {
		time.Sleep(time.Hour)
		runtime.KeepAlive(b)
	}
}

// helperParent starts a group-leaving command like gcloud, prints the pid of
// its grandchild and blocks until it is killed, without stopping anything.
func helperParent() {
	p, err := Start(Spec{Name: "helper", Args: groupLeaver()})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println(grandchildPID(p))
	select {}
}

// groupLeaver is a command that, as gcloud does, moves into a process group
// of its own and starts a long-running child there, printing its pid.
func groupLeaver() []string {
	return []string{"setsid", "sh", "-c", `sleep 300 & echo "child $!"; wait`}
}

// grandchildPID waits for the pid groupLeaver prints.
func grandchildPID(p *Process) int {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for line := range strings.Lines(p.Output()) {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "child "); ok {
				if pid, err := strconv.Atoi(rest); err == nil {
					return pid
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0
}

// running reports whether pid is a live process (not a zombie, which an
// init that does not reap may leave behind).
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

func requireSetsid(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("needs setsid")
	}
}

func TestStopEndsACommandThatMovedToItsOwnProcessGroup(t *testing.T) {
	requireSetsid(t)
	for _, tc := range []struct {
		name string
		stop func(*Process) error
	}{
		{"Stop ends it and its child", (*Process).Stop},
		{"Kill ends it and its child", (*Process).Kill},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Start(Spec{Name: "leaver", Args: groupLeaver()})
			if err != nil {
				t.Fatal(err)
			}
			child := grandchildPID(p)
			if child == 0 {
				_ = p.Kill()
				t.Fatalf("no child pid in the output %q", p.Output())
			}
			if !p.Alive() || !running(child) {
				t.Fatal("the command is not running after Start")
			}
			if err := tc.stop(p); err != nil {
				t.Fatalf("stop: %v", err)
			}
			if p.Alive() {
				t.Error("Alive after stop")
			}
			if running(child) {
				t.Errorf("the child %d of the command outlived the stop", child)
			}
			if err := p.Stop(); err != nil {
				t.Errorf("a second Stop: %v", err)
			}
		})
	}
}

func TestStopAsksFirstAndKillDoesNot(t *testing.T) {
	// The command reports SIGTERM and exits; SIGKILL leaves no chance.
	args := []string{"sh", "-c", `trap 'echo terminated; exit 0' TERM; echo ready; while :; do sleep 0.05; done`}
	for _, tc := range []struct {
		name           string
		stop           func(*Process) error
		wantTerminated bool
	}{
		{"Stop sends SIGTERM before it kills", (*Process).Stop, true},
		{"Kill kills at once", (*Process).Kill, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Start(Spec{Name: "trapper", Args: args, Grace: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			for !strings.Contains(p.Output(), "ready") {
				time.Sleep(10 * time.Millisecond)
			}
			if err := tc.stop(p); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(p.Output(), "terminated"); got != tc.wantTerminated {
				t.Errorf("the command saw SIGTERM: %v, want %v (output %q)", got, tc.wantTerminated, p.Output())
			}
		})
	}
}

func TestStopKillsACommandThatIgnoresSIGTERMAfterTheGrace(t *testing.T) {
	p, err := Start(Spec{Name: "stubborn", Args: []string{"sh", "-c", `trap '' TERM; echo ready; while :; do sleep 0.05; done`}, Grace: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(p.Output(), "ready") {
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Stop took %s with a grace of 200ms", took)
	}
	if p.Alive() {
		t.Error("Alive after Stop")
	}
}

// TestNothingOutlivesAParentKilledWithoutStopping kills, with SIGKILL, a
// process that started a command and never stopped it, as a test binary
// killed by a timeout would be: the supervisor must end the command and its
// child anyway.
func TestNothingOutlivesAParentKilledWithoutStopping(t *testing.T) {
	requireSetsid(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(exe, "-test.run=^$")
	parent.Env = append(os.Environ(), helperEnv+"=1")
	stdout, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = parent.Process.Kill()
		_ = parent.Wait()
		t.Fatalf("read the helper's output: %v", err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || child == 0 {
		_ = parent.Process.Kill()
		_ = parent.Wait()
		t.Fatalf("helper said %q, want the child's pid", line)
	}
	if !running(child) {
		t.Fatalf("child %d not running while its parent lives", child)
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for running(child) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d still running 10s after its parent was killed", child)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestStartFailsForAMissingProgram(t *testing.T) {
	p, err := Start(Spec{Name: "missing", Args: []string{"emuproc-no-such-program"}})
	if err != nil {
		t.Fatal(err) // the supervisor starts; the program fails in it
	}
	defer p.Stop()
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the supervisor did not exit when its program could not run")
	}
	if err := p.WaitTCP(t.Context(), "127.0.0.1:1", time.Second); !errors.Is(err, ErrExited) {
		t.Errorf("WaitTCP = %v, want ErrExited", err)
	}
}
