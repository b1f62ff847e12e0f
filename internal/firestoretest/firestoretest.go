package firestoretest

import (
	"context"
	"errors"
	"testing"

	"cloud.google.com/go/firestore"

	"github.com/dsdelta/dsdelta/internal/emuproc"
)

// ProjectID is the project the emulator clients use.
const ProjectID = "dsdelta-test"

// Emulator is a running Firestore emulator started by Start.
type Emulator = emuproc.Emulator

// ErrUnavailable is returned by Start when gcloud, Java or the Firestore
// emulator component is not installed.
var ErrUnavailable = errors.New("firestore emulator unavailable")

// Start starts an emulator on a free local port and waits until it answers.
// gcloud runs under emuproc's supervisor, so neither gcloud nor its JVM
// outlives the test binary, even when it dies without calling Stop.
func Start(ctx context.Context) (*Emulator, error) {
	return emuproc.Firestore().Start(ctx, ErrUnavailable)
}

// Main runs the tests of m with an emulator and exits with their status. Use
// it as TestMain: func TestMain(m *testing.M) { firestoretest.Main(m) }.
func Main(m *testing.M) {
	emuproc.Firestore().Main(m)
}

// NewClient returns a client of the emulator Main started, closed when the
// test ends. Without an emulator it skips the test, or fails it when
// CI=true.
func NewClient(t testing.TB) *firestore.Client {
	t.Helper()
	host := emuproc.Firestore().Host(t)
	client, err := firestore.NewClient(context.Background(), ProjectID)
	if err != nil {
		t.Fatalf("firestore client for emulator %s: %v", host, err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}
