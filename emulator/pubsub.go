package main

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Topics of the stack, named as terraform names them in the cloud.
const (
	// TopicNotifications receives fake-gcs-server's object notifications
	// (GCS JSON_API_V1 format) for the source bucket.
	TopicNotifications = "gcs-notifications"
	// TopicMerge receives merge wake-ups {"table":"db.table"}.
	TopicMerge = "dsdelta-merge"
	// TopicCompact receives the scheduler's ticks.
	TopicCompact = "dsdelta-compact"
	// TopicDeadLetter receives quarantined files and undeliverable messages.
	TopicDeadLetter = "dsdelta-dead-letter"
	// TopicReconcile receives what compact's reconcile hands to onfile:
	// object notifications, in the GCS format, for source objects whose
	// notification never came (DSDELTA_RECONCILE_TOPIC).
	TopicReconcile = "dsdelta-reconcile"
)

// SubscriptionDeadLetters is a pull subscription on TopicDeadLetter that
// keeps dead letters for inspection.
const SubscriptionDeadLetters = "dsdelta-dead-letters"

// newPubSubClient returns a client of the Pub/Sub emulator at host.
func newPubSubClient(ctx context.Context, project, host string) (*pubsub.Client, error) {
	c, err := pubsub.NewClient(ctx, project,
		option.WithEndpoint(host),
		option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())),
		option.WithTelemetryDisabled(),
	)
	if err != nil {
		return nil, fmt.Errorf("pubsub client for %s: %w", host, err)
	}
	return c, nil
}

// pushSubscription is a push subscription to one function.
type pushSubscription struct {
	name     string
	topic    string
	endpoint string // the function's URL
	ack      time.Duration
	// deadLetter enables a dead-letter policy after maxAttempts.
	deadLetter  bool
	maxAttempts int32
}

// createTopology creates the topics and subscriptions: a push subscription
// per function (with a retry policy and, where set, a dead-letter policy)
// and a pull subscription keeping dead letters.
func createTopology(ctx context.Context, c *pubsub.Client, project string, subs []pushSubscription) error {
	topicName := func(id string) string { return "projects/" + project + "/topics/" + id }
	for _, id := range []string{TopicNotifications, TopicMerge, TopicCompact, TopicDeadLetter, TopicReconcile} {
		if _, err := c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: topicName(id)}); err != nil && !exists(err) {
			return fmt.Errorf("create topic %s: %w", id, err)
		}
	}
	for _, s := range subs {
		sub := &pubsubpb.Subscription{
			Name:  "projects/" + project + "/subscriptions/" + s.name,
			Topic: topicName(s.topic),
			// functions-framework-go turns a push body into a
			// messagePublished CloudEvent and takes the topic from the
			// URL path, as Cloud Functions' legacy push trigger does.
			PushConfig:         &pubsubpb.PushConfig{PushEndpoint: s.endpoint + "/" + topicName(s.topic)},
			AckDeadlineSeconds: int32(s.ack / time.Second),
			RetryPolicy: &pubsubpb.RetryPolicy{
				MinimumBackoff: durationpb.New(time.Second),
				MaximumBackoff: durationpb.New(10 * time.Second),
			},
		}
		if s.deadLetter {
			sub.DeadLetterPolicy = &pubsubpb.DeadLetterPolicy{DeadLetterTopic: topicName(TopicDeadLetter), MaxDeliveryAttempts: s.maxAttempts}
		}
		if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, sub); err != nil && !exists(err) {
			return fmt.Errorf("create push subscription %s to %s: %w", s.name, s.endpoint, err)
		}
	}
	_, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name:  "projects/" + project + "/subscriptions/" + SubscriptionDeadLetters,
		Topic: topicName(TopicDeadLetter),
	})
	if err != nil && !exists(err) {
		return fmt.Errorf("create subscription %s: %w", SubscriptionDeadLetters, err)
	}
	return nil
}

// exists reports an AlreadyExists error: a --data-dir reused from an
// earlier run may hold the topology already.
func exists(err error) bool { return status.Code(err) == codes.AlreadyExists }
