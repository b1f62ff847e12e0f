package pubsubtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dsdelta/dsdelta/internal/emuproc"
)

// ProjectID is the project the emulator clients use.
const ProjectID = "dsdelta-test"

// Emulator is a running Pub/Sub emulator started by Start.
type Emulator = emuproc.Emulator

// ErrUnavailable is returned by Start when gcloud, Java or the Pub/Sub
// emulator component is not installed.
var ErrUnavailable = errors.New("pubsub emulator unavailable")

// Start starts an emulator on a free local port and waits until it answers.
// gcloud runs under emuproc's supervisor, so neither gcloud nor its JVM
// outlives the test binary, even when it dies without calling Stop.
func Start(ctx context.Context) (*Emulator, error) {
	return emuproc.PubSub().Start(ctx, ErrUnavailable)
}

// Main runs the tests of m with an emulator and exits with their status. Use
// it as TestMain: func TestMain(m *testing.M) { pubsubtest.Main(m) }.
func Main(m *testing.M) {
	emuproc.PubSub().Main(m)
}

// NewClient returns a client of the emulator Main started, closed when the
// test ends. Without an emulator it skips the test, or fails it when
// CI=true.
func NewClient(t testing.TB) *pubsub.Client {
	t.Helper()
	client, err := ClientFor(context.Background(), emuproc.PubSub().Host(t))
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
