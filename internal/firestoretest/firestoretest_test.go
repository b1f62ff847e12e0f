package firestoretest

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/dsdelta/dsdelta/internal/emuproc"
)

// TestStartServesAndStopLeavesNoProcess starts its own emulator (not through
// Main), uses it, stops it and checks that gcloud's whole process group,
// the JVM included, is gone and the port closed.
func TestStartServesAndStopLeavesNoProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an emulator")
	}
	ctx := context.Background()
	e, err := Start(ctx)
	if errors.Is(err, ErrUnavailable) {
		emuproc.Require(t, "Firestore emulator", err)
	}
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	stopped := false
	defer func() {
		if !stopped {
			e.Stop()
		}
	}()
	t.Setenv(emuproc.Firestore().HostEnv, e.Host)
	client, err := firestore.NewClient(ctx, ProjectID)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	defer client.Close()
	doc := client.Collection("firestoretest").Doc("probe")
	if _, err := doc.Set(ctx, map[string]any{"n": 1}); err != nil {
		t.Fatalf("write to the emulator: %v", err)
	}
	snap, err := doc.Get(ctx)
	if err != nil || snap.Data()["n"] != int64(1) {
		t.Fatalf("read back = %v, %v; want n=1", snap.Data(), err)
	}
	if !e.Alive() {
		t.Fatal("no emulator process is running before Stop")
	}
	e.Stop()
	stopped = true
	if e.Alive() {
		t.Fatal("an emulator process (gcloud, its JVM or the supervisor) is still running after Stop")
	}
	if conn, err := net.DialTimeout("tcp", e.Host, time.Second); err == nil {
		conn.Close()
		t.Fatalf("emulator port %s still accepts connections after Stop", e.Host)
	}
}
