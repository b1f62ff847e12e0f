//go:build !linux

package gcstest

import "os/exec"

// setProcAttr has nothing to add outside Linux; Close stops the server.
func setProcAttr(cmd *exec.Cmd) {}
