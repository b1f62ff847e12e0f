//go:build !unix

package main

import (
	"errors"
	"io"
	"time"
)

// errUnsupported is returned where processes cannot be supervised.
var errUnsupported = errors.New("the emulator stack runs on Linux or macOS only")

func startProcess(name string, env []string, out io.Writer, argv ...string) (*process, error) {
	return nil, errUnsupported
}

func (p *process) kill() {}

func (p *process) stop(grace time.Duration) {}

func groupAlive(pgid int) bool { return false }
