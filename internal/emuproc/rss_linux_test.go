//go:build linux

package emuproc

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPeakRSSIsTheCommandsOwnHighWaterMark(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const mib = 64
	p, err := Start(Spec{Name: "holder", Args: []string{exe}, Env: []string{holdEnv + "=" + strconv.Itoa(mib)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.Output(), "ready") {
		if time.Now().After(deadline) {
			t.Fatalf("the holder never got ready: %q", p.Output())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The supervisor is a shell: what it reports must be the command.
	if got, err := os.Readlink("/proc/" + strconv.Itoa(p.Pid()) + "/exe"); err != nil || got != exe {
		t.Errorf("Pid is a process running %q (%v), want the command %q", got, err, exe)
	}
	rss, err := p.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	if rss < mib<<20 {
		t.Errorf("PeakRSS = %d MiB, want at least the %d MiB the command holds", rss>>20, mib)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.PeakRSS(); err == nil {
		t.Error("PeakRSS of an exited command succeeded")
	}
}
