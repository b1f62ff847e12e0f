//go:build unix

package emuproc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// supervisor runs the command given as its arguments and stays its parent,
// in the process group Start gives it; the command inherits that group
// unless it moves to one of its own, as gcloud does. The supervisor reports
// the command's pid on fd 3 and exits with the command. A watcher reads the
// supervisor's stdin, a pipe from this process: when it closes, the watcher
// terminates the command and its group.
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

// Start starts spec's command under a supervisor, as the package doc
// describes, and returns once the command runs; it does not wait for it to
// be ready (see WaitHTTP and WaitTCP).
func Start(spec Spec) (*Process, error) {
	p, out, err := newProcess(spec)
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", p.name, err)
	}
	defer pr.Close()
	p.cmd = exec.Command("sh", append([]string{"-c", supervisor, "sh"}, spec.Args...)...)
	p.cmd.Env = append(os.Environ(), spec.Env...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.ExtraFiles = []*os.File{pw}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A JVM or a killed child may keep the output pipe open a little
	// longer; Wait must not wait for it.
	p.cmd.WaitDelay = 2 * time.Second
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		pw.Close()
		return nil, fmt.Errorf("start %s: %w", p.name, err)
	}
	if err := p.cmd.Start(); err != nil {
		pw.Close()
		return nil, fmt.Errorf("start %s (%s): %w", p.name, spec.Args[0], err)
	}
	pw.Close()
	p.wait()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		_ = p.Kill()
		return nil, fmt.Errorf("start %s: no pid from the supervisor: %w", p.name, err)
	}
	if p.pid, err = strconv.Atoi(strings.TrimSpace(line)); err != nil {
		_ = p.Kill()
		return nil, fmt.Errorf("start %s: bad pid %q from the supervisor", p.name, line)
	}
	return p, nil
}

// terminate sends SIGTERM to the command and its group unless grace is 0,
// waits up to grace for them to exit, kills what is left of the command's and
// the supervisor's groups, and waits until none of their processes is left.
func (p *Process) terminate(grace time.Duration) error {
	_ = p.stdin.Close() // also ends the watcher's wait
	if p.pid > 0 && grace > 0 {
		_ = syscall.Kill(-p.pid, syscall.SIGTERM)
		_ = syscall.Kill(p.pid, syscall.SIGTERM)
		// gcloud exits at once; its JVM takes a moment to shut down.
		deadline := time.Now().Add(grace)
		for time.Now().Before(deadline) && !p.exited() {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if p.pid > 0 {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	// The JVM of a gcloud emulator is not our child: wait until it is gone.
	deadline := time.Now().Add(goneTimeout)
	for p.Alive() {
		if time.Now().After(deadline) {
			return fmt.Errorf("stop %s: %w after %s", p.name, ErrStillRunning, goneTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// exited reports whether the command and every process of its group have
// exited.
func (p *Process) exited() bool {
	select {
	case <-p.done:
		return !groupAlive(p.pid)
	default:
		return false
	}
}

// Alive reports whether a process of the command's process group or of its
// supervisor's is still running.
func (p *Process) Alive() bool {
	return (p.pid > 0 && groupAlive(p.pid)) || groupAlive(p.cmd.Process.Pid)
}

// groupAlive reports whether a process of group pgid is still running.
// Zombies do not count: a JVM whose parent died first is reparented and may
// stay a zombie until its new parent reaps it, but it holds no resources.
func groupAlive(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
	}
	for _, ent := range entries {
		if _, err := strconv.Atoi(ent.Name()); err != nil {
			continue
		}
		state, group, ok := procStat("/proc/" + ent.Name() + "/stat")
		if !ok || group != pgid {
			continue
		}
		if state != "Z" || threadsAlive("/proc/"+ent.Name()+"/task") {
			return true
		}
	}
	return false
}

// threadsAlive reports whether a thread of a process is not a zombie. The
// leader of a JVM being killed shows as a zombie while its other threads
// are still exiting, and holding the process's sockets.
func threadsAlive(taskDir string) bool {
	tasks, err := os.ReadDir(taskDir)
	if err != nil {
		return false
	}
	for _, task := range tasks {
		if state, _, ok := procStat(taskDir + "/" + task.Name() + "/stat"); ok && state != "Z" && state != "X" {
			return true
		}
	}
	return false
}

// procStat returns the state and process group from a /proc stat file.
func procStat(path string) (state string, pgid int, ok bool) {
	stat, err := os.ReadFile(path)
	if err != nil {
		return "", 0, false
	}
	// The command is in parentheses and may hold spaces; after it come
	// state, ppid, pgrp.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", 0, false
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 3 {
		return "", 0, false
	}
	pgid, err = strconv.Atoi(fields[2])
	return fields[0], pgid, err == nil
}
