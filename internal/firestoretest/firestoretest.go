// Package firestoretest runs the official Cloud Firestore emulator for a test
// binary. A package's TestMain calls Main, which starts one emulator
// (`gcloud emulators firestore start`), points FIRESTORE_EMULATOR_HOST at it
// for the whole binary and stops it, with every child process, when the
// tests end. Tests then call NewClient, which skips when the emulator is not
// available, or fails when CI=true, because CI must never pass by skipping.
//
// When FIRESTORE_EMULATOR_HOST is already set, Main uses that emulator and
// starts none. Tests isolate themselves with their own collection prefix.
package firestoretest

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
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
)

// ProjectID is the project the emulator clients use.
const ProjectID = "dsdelta-test"

// hostEnv is the variable the Firestore client reads to reach an emulator.
const hostEnv = "FIRESTORE_EMULATOR_HOST"

// unavailableEnv carries, from Main to NewClient, why no emulator runs.
const unavailableEnv = "DSDELTA_FIRESTORE_EMULATOR_UNAVAILABLE"

// startTimeout bounds the emulator's start (a JVM start, several seconds).
const startTimeout = 90 * time.Second

// Emulator is a running Firestore emulator started by Start.
type Emulator struct {
	// Host is the emulator's host:port, the value of FIRESTORE_EMULATOR_HOST.
	Host string

	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *syncBuffer
	done  chan struct{} // closed when cmd has exited
}

// syncBuffer collects the emulator's output for error messages.
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

// ErrUnavailable is returned by Start when gcloud or its Firestore emulator
// component is not installed.
var ErrUnavailable = errors.New("firestore emulator unavailable")

// supervisor runs gcloud, which puts itself and its children (a shell script
// and the JVM) in a process group of their own, and kills that group when its
// stdin closes. Stop closes stdin; and when the test binary dies without
// stopping (a panic, a test timeout, SIGKILL) the kernel closes the pipe, so
// neither gcloud nor its java child outlives the tests. The first line of
// output names the group for Stop's own SIGKILL.
const supervisor = `gcloud emulators firestore start --host-port="$1" --quiet &
pid=$!
echo "firestoretest: gcloud pid $pid"
cat >/dev/null
kill -TERM -"$pid" "$pid" 2>/dev/null
sleep 3
kill -KILL -"$pid" 2>/dev/null
exit 0`

// Start starts an emulator on a free local port and waits until it answers.
func Start(ctx context.Context) (*Emulator, error) {
	if _, err := exec.LookPath("gcloud"); err != nil {
		return nil, fmt.Errorf("%w: gcloud not on PATH", ErrUnavailable)
	}
	if _, err := exec.LookPath("java"); err != nil {
		return nil, fmt.Errorf("%w: java not on PATH (the emulator needs Java 17+)", ErrUnavailable)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	host := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	e := &Emulator{Host: host, out: &syncBuffer{}, done: make(chan struct{})}
	e.cmd = exec.Command("sh", "-c", supervisor, "sh", host)
	e.cmd.Stdout, e.cmd.Stderr = e.out, e.out
	// Wait must not wait for the JVM, which inherits the output pipe.
	e.cmd.WaitDelay = time.Second
	// No Pdeathsig: it fires when the starting OS thread exits, which in Go
	// can happen long before the test binary does.
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if e.stdin, err = e.cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("start firestore emulator: %w", err)
	}
	if err := e.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start firestore emulator: %w", err)
	}
	go func() {
		_ = e.cmd.Wait()
		close(e.done)
	}()
	if err := e.waitReady(ctx); err != nil {
		e.Stop()
		out := e.out.String()
		if strings.Contains(out, "component") || strings.Contains(out, "not installed") {
			return nil, fmt.Errorf("%w: %v\n%s", ErrUnavailable, err, out)
		}
		return nil, fmt.Errorf("start firestore emulator on %s: %w\n%s", host, err, out)
	}
	return e, nil
}

// waitReady polls the emulator's root URL, which answers "Ok" once it serves.
func (e *Emulator) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.Host+"/", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-e.done:
			return errors.New("emulator exited before it was ready")
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w", startTimeout, ctx.Err())
		case <-tick.C:
		}
	}
}

// Stop kills the emulator's process group and waits until none of its
// processes is left. It is safe to call more than once.
func (e *Emulator) Stop() {
	_ = e.stdin.Close()
	pgid := e.gcloudPID()
	deadline := time.Now().Add(15 * time.Second)
	for pgid > 0 && time.Now().Before(deadline) && groupAlive(pgid) {
		time.Sleep(100 * time.Millisecond)
	}
	if pgid > 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
	<-e.done
}

// gcloudPID returns the pid (and process group) of gcloud that the
// supervisor printed, or 0.
func (e *Emulator) gcloudPID() int {
	const marker = "firestoretest: gcloud pid "
	out := e.out.String()
	i := strings.Index(out, marker)
	if i < 0 {
		return 0
	}
	rest := out[i+len(marker):]
	if j := strings.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	pid, err := strconv.Atoi(strings.TrimSpace(rest))
	if err != nil {
		return 0
	}
	return pid
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
		stat, err := os.ReadFile("/proc/" + ent.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command, which is in parentheses and may
		// contain spaces: state ppid pgrp ...
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 3 || fields[0] == "Z" {
			continue
		}
		if g, err := strconv.Atoi(fields[2]); err == nil && g == pgid {
			return true
		}
	}
	return false
}

// freePort asks the kernel for a free TCP port on the loopback interface.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Main runs the tests of m with an emulator and exits with their status. Use
// it as TestMain: func TestMain(m *testing.M) { firestoretest.Main(m) }.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv(hostEnv) != "" {
		return m.Run()
	}
	e, err := Start(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "firestoretest: %v\n", err)
		os.Setenv(unavailableEnv, err.Error())
		return m.Run()
	}
	defer e.Stop()
	os.Setenv(hostEnv, e.Host)
	defer os.Unsetenv(hostEnv)
	return m.Run()
}

// NewClient returns a client of the emulator Main started, closed when the
// test ends. Without an emulator it skips the test, or fails it when
// CI=true.
func NewClient(t testing.TB) *firestore.Client {
	t.Helper()
	if os.Getenv(hostEnv) == "" {
		why := os.Getenv(unavailableEnv)
		if why == "" {
			why = "no emulator: call firestoretest.Main from TestMain or set " + hostEnv
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("Firestore emulator required when CI=true: %s", why)
		}
		t.Skipf("Firestore emulator unavailable, skipping (install gcloud with the cloud-firestore-emulator component and Java 17+): %s", why)
	}
	client, err := firestore.NewClient(context.Background(), ProjectID)
	if err != nil {
		t.Fatalf("firestore client for emulator %s: %v", os.Getenv(hostEnv), err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}
