package emuproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ErrExited is returned by the Wait methods when the process exits before
// it is ready.
var ErrExited = errors.New("exited before it was ready")

// ErrMissingTool is returned by Gcloud.Start when gcloud, Java or the
// emulator's gcloud component is not installed.
var ErrMissingTool = errors.New("missing tool")

// ErrStillRunning is returned by Stop and Kill when a process of the command
// is still running after they gave up waiting.
var ErrStillRunning = errors.New("processes still running")

// DefaultGrace is how long Stop lets the command end after SIGTERM when
// Spec.Grace is zero.
const DefaultGrace = 3 * time.Second

// goneTimeout bounds how long Stop waits, after SIGKILL, until no process of
// the command's group is left: a JVM that is not our child is reaped by
// someone else and may take a moment to go.
const goneTimeout = 15 * time.Second

// Spec describes a command to start.
type Spec struct {
	// Name names the process in errors, e.g. "firestore emulator".
	Name string
	// Args is the command line; Args[0] is the program, looked up on PATH.
	Args []string
	// Env is added to this process's environment.
	Env []string
	// Output receives the command's stdout and stderr. When nil, the
	// output is kept in memory and returned by Process.Output.
	Output io.Writer
	// Grace is how long Stop lets the command end after SIGTERM before it
	// kills what is left; DefaultGrace when zero.
	Grace time.Duration
}

// Process is a command started by Start.
type Process struct {
	name  string
	grace time.Duration
	cmd   *exec.Cmd
	stdin io.WriteCloser // the supervisor's stdin; closing it stops the command
	pid   int            // the command's pid, and (for gcloud) its process group
	out   *syncBuffer    // the output when Spec.Output is nil
	done  chan struct{}  // closed when the command (its supervisor) has exited
	err   error          // the exit status, set before done closes
	once  sync.Once      // Stop and Kill run once
	stop  error          // what the first Stop or Kill returned
}

func newProcess(spec Spec) (*Process, io.Writer, error) {
	if len(spec.Args) == 0 {
		return nil, nil, fmt.Errorf("start %s: no command", spec.Name)
	}
	p := &Process{name: spec.Name, grace: spec.Grace, done: make(chan struct{})}
	if p.grace <= 0 {
		p.grace = DefaultGrace
	}
	out := spec.Output
	if out == nil {
		p.out = &syncBuffer{}
		out = p.out
	}
	return p, out, nil
}

// wait reaps the process in the background and closes done.
func (p *Process) wait() {
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
}

// Name returns Spec.Name.
func (p *Process) Name() string { return p.name }

// Pid returns the command's process id: on unix the command's own, not
// its supervisor's, so what is read from /proc about it is the command's.
func (p *Process) Pid() int {
	if p.pid > 0 {
		return p.pid
	}
	return p.cmd.Process.Pid
}

// Done returns a channel closed when the command has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Output returns what the command has written so far when Spec.Output was
// nil, for error messages; otherwise "".
func (p *Process) Output() string {
	if p.out == nil {
		return ""
	}
	return p.out.String()
}

// Stop ends the command: SIGTERM to it and its process group, up to the
// grace period for it to exit, then SIGKILL to whatever is left. It returns
// when no process of the command is left, or with ErrStillRunning after
// waiting in vain. Later calls return what the first returned.
func (p *Process) Stop() error {
	p.once.Do(func() { p.stop = p.terminate(p.grace) })
	return p.stop
}

// Kill ends the command at once with SIGKILL, as a crash would, and returns
// like Stop, which it replaces.
func (p *Process) Kill() error {
	p.once.Do(func() { p.stop = p.terminate(0) })
	return p.stop
}

// WaitHTTP polls url until it answers 200 OK, the process exits (ErrExited)
// or the timeout passes.
func (p *Process) WaitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	return p.poll(ctx, url, timeout, func(ctx context.Context) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// WaitTCP waits until addr accepts TCP connections, the process exits
// (ErrExited) or the timeout passes. It suits servers that an HTTP probe
// would disturb.
func (p *Process) WaitTCP(ctx context.Context, addr string, timeout time.Duration) error {
	var d net.Dialer
	return p.poll(ctx, addr, timeout, func(ctx context.Context) bool {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// poll calls ready every 50ms until it is true, the process exits or the
// timeout passes.
func (p *Process) poll(ctx context.Context, target string, timeout time.Duration, ready func(context.Context) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if ready(ctx) {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s %w (%v)", p.name, ErrExited, p.err)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s after %s: %w", p.name, target, timeout, ctx.Err())
		case <-tick.C:
		}
	}
}

// FreePort asks the kernel for a free TCP port on the loopback interface.
// The port is released before it returns, so another process may take it
// first: a caller whose server then fails to start can try another.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// GcloudEnv returns the variables that keep gcloud from prompting, checking
// for updates or reporting usage.
func GcloudEnv() []string {
	return []string{
		"CLOUDSDK_CORE_DISABLE_PROMPTS=1",
		"CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK=true",
		"CLOUDSDK_CORE_DISABLE_USAGE_REPORTING=true",
	}
}

// gcloudStartTimeout bounds an emulator's start: a JVM start, several
// seconds, longer on a busy machine.
const gcloudStartTimeout = 90 * time.Second

// Gcloud describes an official emulator that gcloud starts, and how the
// tests of a binary share one.
type Gcloud struct {
	// Name names the emulator in messages.
	Name string
	// Command is gcloud's command line, without --host-port.
	Command []string
	// Install says what to install, for skip messages.
	Install string
	// HostEnv is the variable Google's client library reads to reach the
	// emulator, e.g. FIRESTORE_EMULATOR_HOST.
	HostEnv string
}

// Firestore is the official Cloud Firestore emulator.
func Firestore() Gcloud {
	return Gcloud{
		Name:    "Firestore emulator",
		Command: []string{"emulators", "firestore", "start"},
		Install: "gcloud with the cloud-firestore-emulator component and Java 17+",
		HostEnv: "FIRESTORE_EMULATOR_HOST",
	}
}

// PubSub is the official Cloud Pub/Sub emulator.
func PubSub() Gcloud {
	return Gcloud{
		Name:    "Pub/Sub emulator",
		Command: []string{"beta", "emulators", "pubsub", "start"},
		Install: "gcloud with the pubsub-emulator component and Java 17+",
		HostEnv: "PUBSUB_EMULATOR_HOST",
	}
}

// whyEnv is the variable in which Main leaves, for Host, why the emulator
// did not start, e.g. DSDELTA_FIRESTORE_EMULATOR_UNAVAILABLE.
func (g Gcloud) whyEnv() string {
	return "DSDELTA_" + strings.TrimSuffix(g.HostEnv, "_HOST") + "_UNAVAILABLE"
}

// Emulator is a running emulator started by Gcloud.Start.
type Emulator struct {
	// Host is the emulator's host:port, the value for Gcloud.HostEnv.
	Host string

	proc *Process
}

// Start starts the emulator, `gcloud <Command...> --host-port=127.0.0.1:PORT
// --quiet`, on a free port and waits until its root URL answers 200 OK
// (both emulators answer "Ok" there once they serve). When gcloud, Java or
// the emulator's component is not installed, the error wraps ErrMissingTool
// and unavailable, the caller's own sentinel, when it is not nil.
func (g Gcloud) Start(ctx context.Context, unavailable error) (*Emulator, error) {
	missing := func(format string, args ...any) error {
		err := fmt.Errorf("%w: "+format, append([]any{ErrMissingTool}, args...)...)
		if unavailable != nil {
			err = fmt.Errorf("%w: %w", unavailable, err)
		}
		return err
	}
	if _, err := exec.LookPath("gcloud"); err != nil {
		return nil, missing("gcloud not on PATH")
	}
	if _, err := exec.LookPath("java"); err != nil {
		return nil, missing("java not on PATH (the %s needs Java 17+)", g.Name)
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	host := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := append(append([]string{"gcloud"}, g.Command...), "--host-port="+host, "--quiet")
	p, err := Start(Spec{Name: g.Name, Args: args, Env: GcloudEnv()})
	if err != nil {
		return nil, err
	}
	if err := p.WaitHTTP(ctx, "http://"+host+"/", gcloudStartTimeout); err != nil {
		_ = p.Stop()
		out := p.Output()
		if strings.Contains(out, "component") || strings.Contains(out, "not installed") {
			return nil, missing("%v\n%s", err, out)
		}
		return nil, fmt.Errorf("start %s on %s: %w\n%s", g.Name, host, err, out)
	}
	return &Emulator{Host: host, proc: p}, nil
}

// Stop stops the emulator, gcloud and its JVM, and waits until none of its
// processes is left. It is safe to call more than once.
func (e *Emulator) Stop() {
	if err := e.proc.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// Alive reports whether a process of the emulator is still running.
func (e *Emulator) Alive() bool { return e.proc.Alive() }

// Main runs the tests of m with one emulator for the whole binary, with
// HostEnv pointing at it, and exits with their status. When HostEnv is
// already set it uses that emulator and starts none. When the emulator does
// not start it still runs the tests, so that each one needing it skips or
// fails through Host, naming why.
func (g Gcloud) Main(m *testing.M) {
	os.Exit(g.run(m))
}

func (g Gcloud) run(m *testing.M) int {
	if os.Getenv(g.HostEnv) != "" {
		return m.Run()
	}
	e, err := g.Start(context.Background(), nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s unavailable: %v\n", g.Name, err)
		os.Setenv(g.whyEnv(), err.Error())
		return m.Run()
	}
	defer e.Stop()
	os.Setenv(g.HostEnv, e.Host)
	defer os.Unsetenv(g.HostEnv)
	return m.Run()
}

// Host returns the emulator's host:port from HostEnv. Without an emulator
// it skips the test, or fails it when CI=true (see Require).
func (g Gcloud) Host(t testing.TB) string {
	t.Helper()
	host := os.Getenv(g.HostEnv)
	if host == "" {
		why := os.Getenv(g.whyEnv())
		if why == "" {
			why = "no emulator: start it from TestMain or set " + g.HostEnv
		}
		Require(t, g.Name+" ("+g.Install+")", errors.New(why))
	}
	return host
}

// Require passes when err, why tool cannot run, is nil. Otherwise it skips
// the test, or fails it when CI=true, because CI must never pass by
// skipping. tool names what is missing and how to install it.
func Require(t testing.TB, tool string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s required when CI=true: %v", tool, err)
	} else {
		t.Skipf("%s unavailable, skipping: %v", tool, err)
	}
}

// syncBuffer collects a command's output from its two pipes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
