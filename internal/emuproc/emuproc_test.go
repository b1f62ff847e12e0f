package emuproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// sleeper runs until stopped.
func sleeper(t *testing.T) *Process {
	t.Helper()
	p, err := Start(Spec{Name: "sleeper", Args: []string{"sleep", "300"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	return p
}

func TestWaitHTTPWaitsForAnOKAnswer(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("Ok"))
	}))
	defer srv.Close()
	p := sleeper(t)
	if err := p.WaitHTTP(t.Context(), srv.URL, 10*time.Second); err != nil {
		t.Fatalf("WaitHTTP: %v", err)
	}
	if calls.Load() != 3 {
		t.Errorf("WaitHTTP returned after %d requests, want 3 (two 503s, then 200)", calls.Load())
	}
}

func TestWaitsFailWhenNothingAnswers(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	p := sleeper(t)
	for _, tc := range []struct {
		name string
		wait func() error
	}{
		{"WaitHTTP times out", func() error { return p.WaitHTTP(t.Context(), "http://"+addr+"/", 300*time.Millisecond) }},
		{"WaitTCP times out", func() error { return p.WaitTCP(t.Context(), addr, 300*time.Millisecond) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.wait(); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("got %v, want a deadline error", err)
			}
		})
	}
}

func TestWaitTCPReturnsOnceTheAddressListens(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := sleeper(t).WaitTCP(t.Context(), l.Addr().String(), 5*time.Second); err != nil {
		t.Errorf("WaitTCP: %v", err)
	}
}

func TestWaitsReturnErrExitedWhenTheCommandExits(t *testing.T) {
	p, err := Start(Spec{Name: "quitter", Args: []string{"sh", "-c", "echo bye; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	start := time.Now()
	err = p.WaitHTTP(t.Context(), "http://127.0.0.1:1/", time.Minute)
	if !errors.Is(err, ErrExited) {
		t.Fatalf("WaitHTTP = %v, want ErrExited", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("WaitHTTP took %s to see the exit", time.Since(start))
	}
	if !strings.Contains(err.Error(), "quitter") {
		t.Errorf("error %q does not name the process", err)
	}
	if got := p.Output(); !strings.Contains(got, "bye") {
		t.Errorf("Output = %q, want the command's output", got)
	}
}

func TestFreePortCanBeListenedOn(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if port <= 0 || port > 65535 {
		t.Fatalf("FreePort = %d", port)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("listen on the free port: %v", err)
	}
	l.Close()
}

// recorder is a testing.TB that records Skipf and Fatalf instead of
// stopping the goroutine.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Skipf(format string, args ...any)  { r.skipped = fmt.Sprintf(format, args...) }
func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestRequireSkipsLocallyAndFailsInCI(t *testing.T) {
	missing := errors.New("no such tool")
	for _, tc := range []struct {
		name              string
		ci                string
		err               error
		wantSkip, wantErr bool
	}{
		{"an available tool neither skips nor fails", "true", nil, false, false},
		{"a missing tool skips locally", "", missing, true, false},
		{"a missing tool fails when CI=true", "true", missing, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			r := &recorder{TB: t}
			Require(r, "the tool", tc.err)
			if (r.skipped != "") != tc.wantSkip || (r.failed != "") != tc.wantErr {
				t.Fatalf("skipped %q, failed %q; want skip %v, fail %v", r.skipped, r.failed, tc.wantSkip, tc.wantErr)
			}
			if msg := r.skipped + r.failed; tc.err != nil && (!strings.Contains(msg, "the tool") || !strings.Contains(msg, "no such tool")) {
				t.Errorf("message %q does not name the tool and why", msg)
			}
		})
	}
}

func TestGcloudHostReportsWhyThereIsNoEmulator(t *testing.T) {
	g := Gcloud{Name: "the emulator", Install: "the tool", HostEnv: "EMUPROC_TEST_HOST"}
	t.Setenv("CI", "")
	for _, tc := range []struct {
		name, host, why string
		wantHost        string
		wantSkip        string
	}{
		{"a set host is returned", "127.0.0.1:1234", "", "127.0.0.1:1234", ""},
		{"without a host the test skips naming why", "", "java missing", "", "java missing"},
		{"without a host or a reason the test skips naming the variable", "", "", "", "EMUPROC_TEST_HOST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(g.HostEnv, tc.host)
			t.Setenv("DSDELTA_EMUPROC_TEST_UNAVAILABLE", tc.why)
			r := &recorder{TB: t}
			if got := g.Host(r); got != tc.wantHost {
				t.Errorf("Host = %q, want %q", got, tc.wantHost)
			}
			if (tc.wantSkip == "") != (r.skipped == "") || !strings.Contains(r.skipped, tc.wantSkip) {
				t.Errorf("skipped %q, want a skip naming %q", r.skipped, tc.wantSkip)
			}
		})
	}
}

func TestGcloudReportsAMissingToolWithTheCallersSentinel(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	mine := errors.New("my emulator unavailable")
	for _, tc := range []struct {
		name        string
		unavailable error
	}{
		{"with the caller's sentinel", mine},
		{"without one", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Firestore().Start(t.Context(), tc.unavailable)
			if !errors.Is(err, ErrMissingTool) {
				t.Fatalf("Start without gcloud = %v, want ErrMissingTool", err)
			}
			if tc.unavailable != nil && !errors.Is(err, tc.unavailable) {
				t.Errorf("Start without gcloud = %v, want the caller's sentinel too", err)
			}
			if !strings.Contains(err.Error(), "gcloud") {
				t.Errorf("error %q does not name gcloud", err)
			}
		})
	}
}
