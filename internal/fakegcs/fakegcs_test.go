package fakegcs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBinaryBuildsThePinnedVersionWhenNothingIsInstalled hides every
// installed fake-gcs-server (PATH holds only the Go toolchain, the Go bin
// folders are empty): Binary builds the pinned version into the tools
// folder, and the next call finds it there without building again.
func TestBinaryBuildsThePinnedVersionWhenNothingIsInstalled(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no Go toolchain on PATH")
	}
	// The module and build caches stay the machine's, so the build costs
	// a link, not a download.
	caches, err := exec.Command(goTool, "env", "GOMODCACHE", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(caches))
	if len(lines) != 2 {
		t.Fatalf("go env printed %q", caches)
	}
	t.Setenv("GOMODCACHE", lines[0])
	t.Setenv("GOCACHE", lines[1])
	empty := t.TempDir()
	tools := filepath.Join(t.TempDir(), "tools")
	t.Setenv("PATH", filepath.Dir(goTool))
	t.Setenv("GOBIN", empty)
	t.Setenv("GOPATH", empty)
	t.Setenv("HOME", empty)
	t.Setenv("DSDELTA_TOOLS_DIR", tools)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, err := Binary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p != filepath.Join(tools, binName) {
		t.Fatalf("Binary = %s, want it built into %s", p, tools)
	}
	if out, err := exec.CommandContext(ctx, p, "-help").CombinedOutput(); len(out) == 0 {
		t.Fatalf("%s -help printed nothing (%v)", p, err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Binary(ctx)
	if err != nil || again != p {
		t.Fatalf("second Binary = %s, %v", again, err)
	}
	if st2, err := os.Stat(p); err != nil || !st2.ModTime().Equal(st.ModTime()) {
		t.Fatalf("the second call built again")
	}
	if entries, _ := os.ReadDir(tools); len(entries) != 1 {
		t.Fatalf("tools folder holds %d entries, want the binary alone (no build folder left)", len(entries))
	}
}
