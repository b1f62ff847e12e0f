package gcstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/dsdelta/dsdelta/internal/emuproc"
	"github.com/dsdelta/dsdelta/internal/fakegcs"
)

// Version is the fake-gcs-server release the tests are written against.
const Version = fakegcs.Version

// ErrNotInstalled is returned by StartServer when the binary can be neither
// found nor built.
var ErrNotInstalled = fakegcs.ErrUnavailable

// Server is a running fake-gcs-server with an in-memory backend.
type Server struct {
	host string
	proc *emuproc.Process
}

// StartServer starts fake-gcs-server on a free port of 127.0.0.1 and waits
// until it answers. It returns ErrNotInstalled when the binary is missing.
// The caller must Close the server.
func StartServer(ctx context.Context) (*Server, error) {
	bin, err := fakegcs.Binary(ctx)
	if err != nil {
		return nil, err
	}
	// The free port is found by binding and releasing it, so another process
	// can take it in between; then the server exits and we try again.
	var lastErr error
	for range 3 {
		port, err := emuproc.FreePort()
		if err != nil {
			return nil, err
		}
		s, err := start(ctx, bin, port)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start(ctx context.Context, bin string, port int) (*Server, error) {
	s := &Server{host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	var err error
	s.proc, err = emuproc.Start(emuproc.Spec{
		Name: "fake-gcs-server",
		Args: []string{bin,
			"-backend", "memory",
			"-scheme", "http",
			"-host", "127.0.0.1",
			"-port", strconv.Itoa(port),
			"-log-level", "warn",
		},
	})
	if err != nil {
		return nil, err
	}
	if err := s.proc.WaitHTTP(ctx, "http://"+s.host+"/storage/v1/b", 15*time.Second); err != nil {
		s.Close()
		return nil, fmt.Errorf("start %s on %s: %w; output:\n%s", bin, s.host, err, s.Output())
	}
	return s, nil
}

// Host returns "127.0.0.1:port".
func (s *Server) Host() string { return s.host }

// Output returns what the server has logged so far, for failure messages.
func (s *Server) Output() string { return s.proc.Output() }

// Close kills the server and waits until it has exited. It is safe to call
// more than once.
func (s *Server) Close() {
	if err := s.proc.Kill(); err != nil {
		fmt.Fprintf(os.Stderr, "gcstest: %v\n", err)
	}
}

// Start starts a server for the test and stops it when the test ends. It
// skips the test when the binary is missing, unless CI=true, which fails it.
func Start(t testing.TB) string {
	t.Helper()
	s, err := StartServer(t.Context())
	if errors.Is(err, ErrNotInstalled) {
		emuproc.Require(t, "fake-gcs-server", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s.Host()
}

// NewClient returns a storage client for the server at host ("127.0.0.1:port")
// using the JSON API without authentication, as the emulator needs.
func NewClient(ctx context.Context, host string) (*storage.Client, error) {
	client, err := storage.NewClient(ctx,
		option.WithEndpoint("http://"+host+"/storage/v1/"),
		option.WithoutAuthentication(),
		storage.WithJSONReads(),
	)
	if err != nil {
		return nil, fmt.Errorf("new storage client for %s: %w", host, err)
	}
	return client, nil
}

// NewBucket creates a bucket with a unique name for the test and returns its
// name. The name starts with a readable form of the test name.
func NewBucket(t testing.TB, client *storage.Client) string {
	t.Helper()
	var random [6]byte
	if _, err := rand.Read(random[:]); err != nil {
		t.Fatalf("random bucket suffix: %v", err)
	}
	name := bucketStem(t.Name()) + "-" + hex.EncodeToString(random[:])
	if err := client.Bucket(name).Create(t.Context(), "test-project", nil); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	return name
}

// bucketStem turns a test name into the start of a valid bucket name:
// lowercase letters, digits and dashes, at most 40 characters.
func bucketStem(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			if s := b.String(); s != "" && !strings.HasSuffix(s, "-") {
				b.WriteByte('-')
			}
		}
	}
	stem := strings.Trim(b.String(), "-")
	if len(stem) > 40 {
		stem = strings.TrimRight(stem[:40], "-")
	}
	if stem == "" {
		stem = "test"
	}
	return stem
}
