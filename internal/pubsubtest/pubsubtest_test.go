package pubsubtest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"

	"github.com/dsdelta/dsdelta/internal/emuproc"
)

func TestMain(m *testing.M) { Main(m) }

func TestClientPublishesToATopicOfItsOwnAndReceives(t *testing.T) {
	client := NewClient(t)
	topic := NewTopic(t, client)
	if other := NewTopic(t, client); other == topic {
		t.Fatalf("two topics share the id %s", topic)
	}
	sub := "projects/" + ProjectID + "/subscriptions/" + topic + "-sub"
	if _, err := client.SubscriptionAdminClient.CreateSubscription(t.Context(), &pubsubpb.Subscription{
		Name: sub, Topic: "projects/" + ProjectID + "/topics/" + topic,
	}); err != nil {
		t.Fatal(err)
	}
	pub := client.Publisher(topic)
	defer pub.Stop()
	if _, err := pub.Publish(t.Context(), &pubsub.Message{Data: []byte("hello"), Attributes: map[string]string{"k": "v"}}).Get(t.Context()); err != nil {
		t.Fatalf("publish: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var got *pubsub.Message
	err := client.Subscriber(sub).Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		got = m
		cancel()
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("receive: %v", err)
	}
	if got == nil || string(got.Data) != "hello" || got.Attributes["k"] != "v" {
		t.Fatalf("received %+v, want data hello with attribute k=v", got)
	}
}

func TestStopLeavesNoEmulatorProcess(t *testing.T) {
	if os.Getenv(emuproc.PubSub().HostEnv) == "" {
		NewClient(t) // skips or fails like every emulator test
	}
	e, err := Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !e.Alive() {
		t.Fatal("emulator not running after Start")
	}
	e.Stop()
	if e.Alive() {
		t.Error("an emulator process is still running after Stop")
	}
	e.Stop() // a second Stop is harmless
}
