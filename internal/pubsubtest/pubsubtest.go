// Package pubsubtest runs the official Cloud Pub/Sub emulator for a test
// binary. A package's TestMain calls Main, which starts one emulator
// (`gcloud beta emulators pubsub start`) on a free port, points
// PUBSUB_EMULATOR_HOST at it for the whole binary and stops it, with every
// child process, when the tests end. Tests then call NewClient, which skips
// when the emulator is not available, or fails when CI=true, because CI
// must never pass by skipping; and NewTopic for a topic of their own, so
// tests sharing the emulator can run in parallel.
//
// When PUBSUB_EMULATOR_HOST is already set, Main uses that emulator and
// starts none.
package pubsubtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
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

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// ProjectID is the project the emulator clients use.
const ProjectID = "dsdelta-test"

// hostEnv is the variable the Pub/Sub client reads to reach an emulator.
const hostEnv = "PUBSUB_EMULATOR_HOST"

// unavailableEnv carries, from Main to NewClient, why no emulator runs.
const unavailableEnv = "DSDELTA_PUBSUB_EMULATOR_UNAVAILABLE"

// startTimeout bounds the emulator's start (a JVM start, several seconds).
const startTimeout = 90 * time.Second

// ErrUnavailable is returned by Start when gcloud, Java or the Pub/Sub
// emulator component is not installed.
var ErrUnavailable = errors.New("pubsub emulator unavailable")

// supervisor runs gcloud, which moves itself and its JVM into a process
// group of its own, reports gcloud's pid on fd 3, and kills that group when
// its stdin closes: on Stop, and also when the test binary dies without
// stopping (a panic, a test timeout, SIGKILL), because the kernel then
// closes the pipe. So no emulator outlives the tests.
const supervisor = `gcloud beta emulators pubsub start --host-port="$1" --quiet &
pid=$!
echo "$pid" >&3
exec 3>&-
cat >/dev/null
kill -TERM -"$pid" "$pid" 2>/dev/null
sleep 3
kill -KILL -"$pid" "$pid" 2>/dev/null
exit 0`

// Emulator is a running Pub/Sub emulator started by Start.
type Emulator struct {
	// Host is the emulator's host:port, the value of PUBSUB_EMULATOR_HOST.
	Host string

	cmd   *exec.Cmd
	stdin io.WriteCloser
	pgid  int // gcloud's pid and process group
	out   *syncBuffer
	done  chan struct{} // closed when the supervisor has exited
	once  sync.Once
}

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
	e := &Emulator{Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), out: &syncBuffer{}, done: make(chan struct{})}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start pubsub emulator: %w", err)
	}
	defer pr.Close()
	e.cmd = exec.Command("sh", "-c", supervisor, "sh", e.Host)
	e.cmd.Env = append(os.Environ(), "CLOUDSDK_CORE_DISABLE_PROMPTS=1", "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK=true")
	e.cmd.Stdout, e.cmd.Stderr = e.out, e.out
	e.cmd.ExtraFiles = []*os.File{pw}
	// Wait must not wait for the JVM, which inherits the output pipe.
	e.cmd.WaitDelay = time.Second
	// No Pdeathsig: it fires when the starting OS thread exits, which in Go
	// can happen long before the test binary does.
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if e.stdin, err = e.cmd.StdinPipe(); err != nil {
		pw.Close()
		return nil, fmt.Errorf("start pubsub emulator: %w", err)
	}
	if err := e.cmd.Start(); err != nil {
		pw.Close()
		return nil, fmt.Errorf("start pubsub emulator: %w", err)
	}
	pw.Close()
	go func() {
		_ = e.cmd.Wait()
		close(e.done)
	}()
	if line, err := bufio.NewReader(pr).ReadString('\n'); err == nil {
		e.pgid, _ = strconv.Atoi(strings.TrimSpace(line))
	}
	if err := e.waitReady(ctx); err != nil {
		e.Stop()
		out := e.out.String()
		if strings.Contains(out, "component") || strings.Contains(out, "not installed") {
			return nil, fmt.Errorf("%w: %v\n%s", ErrUnavailable, err, out)
		}
		return nil, fmt.Errorf("start pubsub emulator on %s: %w\n%s", e.Host, err, out)
	}
	return e, nil
}

// waitReady polls the emulator's root URL, which answers "Ok" once it serves.
func (e *Emulator) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
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
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop kills the emulator's process group and waits until none of its
// processes is left. It is safe to call more than once.
func (e *Emulator) Stop() {
	e.once.Do(func() {
		_ = e.stdin.Close()
		deadline := time.Now().Add(15 * time.Second)
		for e.pgid > 0 && time.Now().Before(deadline) && groupAlive(e.pgid) {
			time.Sleep(100 * time.Millisecond)
		}
		if e.pgid > 0 {
			_ = syscall.Kill(-e.pgid, syscall.SIGKILL)
		}
		_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
		<-e.done
	})
}

// Alive reports whether a process of the emulator is still running.
func (e *Emulator) Alive() bool {
	return (e.pgid > 0 && groupAlive(e.pgid)) || groupAlive(e.cmd.Process.Pid)
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
// it as TestMain: func TestMain(m *testing.M) { pubsubtest.Main(m) }.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv(hostEnv) != "" {
		return m.Run()
	}
	e, err := Start(context.Background())
	if err != nil {
		fmt.Fprintf(os.Stderr, "pubsubtest: %v\n", err)
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
func NewClient(t testing.TB) *pubsub.Client {
	t.Helper()
	host := os.Getenv(hostEnv)
	if host == "" {
		why := os.Getenv(unavailableEnv)
		if why == "" {
			why = "no emulator: call pubsubtest.Main from TestMain or set " + hostEnv
		}
		if os.Getenv("CI") == "true" {
			t.Fatalf("Pub/Sub emulator required when CI=true: %s", why)
		}
		t.Skipf("Pub/Sub emulator unavailable, skipping (install gcloud with the pubsub-emulator component and Java 17+): %s", why)
	}
	client, err := ClientFor(context.Background(), host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

// ClientFor returns a client of the emulator at host for ProjectID, set up
// without the environment variable.
func ClientFor(ctx context.Context, host string) (*pubsub.Client, error) {
	c, err := pubsub.NewClient(ctx, ProjectID,
		option.WithEndpoint(host),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithTelemetryDisabled(),
	)
	if err != nil {
		return nil, fmt.Errorf("pubsub client for emulator %s: %w", host, err)
	}
	return c, nil
}

// NewTopic creates a topic with a unique id for the test and returns the id.
func NewTopic(t testing.TB, client *pubsub.Client) string {
	t.Helper()
	var random [6]byte
	if _, err := rand.Read(random[:]); err != nil {
		t.Fatalf("random topic suffix: %v", err)
	}
	id := "test-" + hex.EncodeToString(random[:])
	if _, err := client.TopicAdminClient.CreateTopic(t.Context(), &pubsubpb.Topic{Name: "projects/" + ProjectID + "/topics/" + id}); err != nil {
		t.Fatalf("create topic %s: %v", id, err)
	}
	return id
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
