//go:build unix

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// supervisor runs the command given as its arguments and stays its parent.
// The command inherits the supervisor's process group, which the emulator
// gives each supervisor (gcloud moves itself and its JVM into a group of its
// own; both are reached by the kills below). The supervisor reports the
// command's pid on fd 3 and exits with the command. A watcher reads the
// supervisor's stdin, a pipe from the emulator: when it closes — Stop, or the
// emulator dying in any way, even SIGKILL — the watcher terminates the
// command and its group, so no child outlives the emulator.
const supervisor = `exec 4<&0
"$@" &
pid=$!
echo "$pid" >&3
exec 3>&-
( cat <&4 >/dev/null
  kill -TERM -"$pid" "$pid" 2>/dev/null
  sleep 5
  kill -KILL -"$pid" "$pid" 2>/dev/null ) >/dev/null 2>&1 &
exec 4<&-
wait "$pid"`

// startProcess starts argv under a supervisor with env added to the
// emulator's environment, its output going to out.
func startProcess(name string, env []string, out io.Writer, argv ...string) (*process, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer pr.Close()
	p := &process{name: name, done: make(chan struct{})}
	p.cmd = exec.Command("sh", append([]string{"-c", supervisor, "sh"}, argv...)...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.ExtraFiles = []*os.File{pw}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A JVM or a killed child may keep the output pipe open a little longer.
	p.cmd.WaitDelay = 2 * time.Second
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		pw.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if err := p.cmd.Start(); err != nil {
		pw.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, argv[0], err)
	}
	pw.Close()
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		p.stop(0)
		return nil, fmt.Errorf("start %s: no pid from the supervisor: %w", name, err)
	}
	if p.pid, err = strconv.Atoi(strings.TrimSpace(line)); err != nil {
		p.stop(0)
		return nil, fmt.Errorf("start %s: bad pid %q", name, line)
	}
	return p, nil
}

// kill ends the command at once with SIGKILL, as a crash would, and waits
// for its supervisor to exit.
func (p *process) kill() {
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	_ = syscall.Kill(p.pid, syscall.SIGKILL)
	<-p.done
}

// stop asks the command to end (SIGTERM to it and its group), waits up to
// grace, then kills whatever is left of both process groups.
func (p *process) stop(grace time.Duration) {
	_ = p.stdin.Close()
	_ = syscall.Kill(-p.pid, syscall.SIGTERM)
	_ = syscall.Kill(p.pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	_ = syscall.Kill(p.pid, syscall.SIGKILL)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	// Wait for the JVM of a gcloud emulator, which is not our child.
	deadline := time.Now().Add(5 * time.Second)
	for groupAlive(p.pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}

// groupAlive reports whether a process of group pgid is still running
// (zombies, which hold nothing, do not count).
func groupAlive(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
	}
	for _, ent := range entries {
		if _, err := strconv.Atoi(ent.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + ent.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command is in parentheses and may hold spaces; after it
		// come state, ppid, pgrp.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 3 || fields[0] == "Z" {
			continue
		}
		if g, err := strconv.Atoi(fields[2]); err == nil && g == pgid {
			return true
		}
	}
	return false
}
