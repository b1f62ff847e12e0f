package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"time"
)

// process is one supervised child process.
type process struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	pid   int           // the command's pid (and, for gcloud, its group)
	done  chan struct{} // closed when the supervisor has exited
	err   error         // the supervisor's exit status, set before done closes
}

// waitHTTP polls url until it answers with a status accepted by ok, the
// process exits or the timeout passes.
func waitHTTP(ctx context.Context, p *process, url string, timeout time.Duration, ok func(status int) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if ok(resp.StatusCode) {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready (%v)", p.name, p.err)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s after %s", p.name, url, timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitListening waits until addr accepts TCP connections, the process exits
// or the timeout passes.
func waitListening(ctx context.Context, p *process, addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	for {
		if c, err := d.DialContext(ctx, "tcp", addr); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready (%v)", p.name, p.err)
		case <-ctx.Done():
			return fmt.Errorf("%s not listening on %s after %s", p.name, addr, timeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
