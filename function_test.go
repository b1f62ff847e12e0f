package dsdelta

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// buildpackMain is the main package the Go buildpack generates for a
// Cloud Functions source deploy: it imports the function's package for its
// registrations and starts the framework on $PORT.
const buildpackMain = `package main

import (
	"log"
	"os"

	"github.com/GoogleCloudPlatform/functions-framework-go/funcframework"

	_ "github.com/dsdelta/dsdelta"
)

func main() {
	port := "8080"
	if p := os.Getenv("PORT"); p != "" {
		port = p
	}
	if err := funcframework.Start(port); err != nil {
		log.Fatalf("funcframework.Start: %v", err)
	}
}
`

// buildLikeBuildpack builds the function binary the way the Go buildpack
// does: a generated main in a module of its own that requires this module,
// replaced by the repository, with no network (GOPROXY=off).
func buildLikeBuildpack(t *testing.T) string {
	t.Helper()
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	gosum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	// Keep the repository's requirements so the build resolves from the
	// module cache alone.
	modLine := regexp.MustCompile(`(?m)^module .*$`)
	mod := modLine.ReplaceAllString(string(gomod), "module example.com/functionbuild")
	mod += fmt.Sprintf("\nrequire github.com/dsdelta/dsdelta v0.0.0\n\nreplace github.com/dsdelta/dsdelta => %s\n", root)
	dir := t.TempDir()
	for name, data := range map[string][]byte{"go.mod": []byte(mod), "go.sum": gosum, "main.go": []byte(buildpackMain)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "function")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build of the buildpack-style main failed: %v\n%s", err, out)
	}
	return bin
}

func TestFunctionsBuildAndServeLikeTheGoBuildpack(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds the whole module; skipped with -short")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("go not on PATH: %v", err)
	}
	bin := buildLikeBuildpack(t)
	for _, target := range []string{"OnFile", "Merge", "Compact"} {
		t.Run(target+" is served at / and refuses a malformed event with a 4xx", func(t *testing.T) {
			port := freePort(t)
			var out bytes.Buffer
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), "FUNCTION_TARGET="+target, "PORT="+port)
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			})
			url := "http://127.0.0.1:" + port + "/"
			resp := postUntilServing(t, url, "not a cloud event")
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 400 || resp.StatusCode >= 500 {
				t.Errorf("malformed event: status %d (%s), want a 4xx; server output:\n%s", resp.StatusCode, body, out.String())
			}
		})
	}
	t.Run("an unknown target makes the server exit with a clear error", func(t *testing.T) {
		cmd := exec.CommandContext(t.Context(), bin)
		cmd.Env = append(os.Environ(), "FUNCTION_TARGET=NoSuchFunction", "PORT="+freePort(t))
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("server with an unknown target exited cleanly:\n%s", out)
		}
		if !strings.Contains(string(out), "NoSuchFunction") {
			t.Errorf("error does not name the target:\n%s", out)
		}
	})
}

// postUntilServing posts body to url until the server answers.
func postUntilServing(t *testing.T, url, body string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			return resp
		}
		select {
		case <-ctx.Done():
			t.Fatalf("server at %s never answered: %v", url, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}
