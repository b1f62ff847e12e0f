//go:build !unix

package emuproc

import (
	"fmt"
	"os"
	"os/exec"
	"time"
)

// Start starts spec's command directly: without process groups there is
// no supervisor, and children the command starts may outlive Stop.
func Start(spec Spec) (*Process, error) {
	p, out, err := newProcess(spec)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(spec.Args[0], spec.Args[1:]...)
	p.cmd.Env = append(os.Environ(), spec.Env...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.WaitDelay = 2 * time.Second
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", p.name, spec.Args[0], err)
	}
	p.wait()
	return p, nil
}

// terminate kills the command, which has no signal to ask it to end, and
// waits for it to exit.
func (p *Process) terminate(time.Duration) error {
	_ = p.cmd.Process.Kill()
	<-p.done
	return nil
}

// Alive reports whether the command is still running.
func (p *Process) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}
