package fakegcs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Module and Version name the fake-gcs-server release the stack and the
// tests are written against.
const (
	Module  = "github.com/fsouza/fake-gcs-server"
	Version = "v1.56.1"
)

// ErrUnavailable is returned when the binary is neither installed nor
// buildable (no Go toolchain on PATH, or the build failed).
var ErrUnavailable = errors.New("fake-gcs-server is not available")

const binName = "fake-gcs-server"

// Binary returns the path of fake-gcs-server: on PATH, in the Go bin
// directories ($GOBIN, $(go env GOPATH)/bin, ~/go/bin), or in the tools
// directory (ToolsDir), where it builds it with `go install Module@Version`
// when it is not there yet.
func Binary(ctx context.Context) (string, error) {
	if p, err := exec.LookPath(binName); err == nil {
		return p, nil
	}
	dir, err := ToolsDir()
	if err != nil {
		return "", err
	}
	for _, d := range append(goBins(), dir) {
		p := filepath.Join(d, binName)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return build(ctx, dir)
}

// ToolsDir is where Binary keeps the binary it builds:
// $DSDELTA_TOOLS_DIR, or a folder per version in the user's cache.
func ToolsDir() (string, error) {
	if d := os.Getenv("DSDELTA_TOOLS_DIR"); d != "" {
		return d, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("%w: no user cache directory for building it (set DSDELTA_TOOLS_DIR): %v", ErrUnavailable, err)
	}
	return filepath.Join(cache, "dsdelta", "tools", binName+"@"+Version), nil
}

// build installs the pinned version into a fresh folder beside dir and
// renames the binary into dir, so a concurrent Binary never runs a binary
// half written.
func build(ctx context.Context, dir string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("%w: not installed, and no Go toolchain on PATH to build it (go install %s@%s)", ErrUnavailable, Module, Version)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, goTool, "install", Module+"@"+Version)
	// Outside any module, so the install resolves the pinned version
	// alone, and into the fresh folder.
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: go install %s@%s: %v: %s", ErrUnavailable, Module, Version, err, strings.TrimSpace(string(out)))
	}
	p := filepath.Join(dir, binName)
	if err := os.Rename(filepath.Join(tmp, binName), p); err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return p, nil
}

// goBins are the folders `go install` puts binaries in.
func goBins() []string {
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			gopath = strings.TrimSpace(string(out))
		}
	}
	for p := range strings.SplitSeq(gopath, string(os.PathListSeparator)) {
		if p != "" {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	return dirs
}
