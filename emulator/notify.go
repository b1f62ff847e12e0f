package main

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/storage"

	"github.com/dsdelta/dsdelta/shared/gcp"
)

// Notify publishes a Cloud Storage notification (payload format
// JSON_API_V1, event OBJECT_FINALIZE) for the current generation of an
// object, exactly as GCS and fake-gcs-server publish it, to the stack's
// notification topic. Publishing it again plays a duplicated notification.
func (s *Stack) Notify(ctx context.Context, bucket, name string) error {
	return s.publishFinalize(ctx, "notify", TopicNotifications, bucket, name, nil)
}

// ReconciledAttribute marks a notification that the reconcile published
// for an object whose own notification never came.
const ReconciledAttribute = gcp.ReconciledAttribute

// PublishReconcile hands an object to onfile as compact's reconcile does:
// its finalize notification, as Notify publishes it, with
// ReconciledAttribute set, on the reconcile topic, which the drop filter
// does not stand in front of.
func (s *Stack) PublishReconcile(ctx context.Context, bucket, name string) error {
	return s.publishFinalize(ctx, "reconcile", TopicReconcile, bucket, name, map[string]string{ReconciledAttribute: "true"})
}

// publishFinalize publishes the finalize notification of an object's
// current generation, with extra attributes, to topic; what names the
// operation in errors.
func (s *Stack) publishFinalize(ctx context.Context, what, topic, bucket, name string, extra map[string]string) error {
	attrs, err := s.storage.Bucket(bucket).Object(name).Attrs(ctx)
	if err != nil {
		return fmt.Errorf("%s gs://%s/%s: %w", what, bucket, name, err)
	}
	msg, err := finalizeNotification(attrs, time.Now())
	if err != nil {
		return fmt.Errorf("%s gs://%s/%s: %w", what, bucket, name, err)
	}
	maps.Copy(msg.Attributes, extra)
	pub := s.pubsub.Publisher(topic)
	defer pub.Stop()
	if _, err := pub.Publish(ctx, msg).Get(ctx); err != nil {
		return fmt.Errorf("%s gs://%s/%s: publish to %s: %w", what, bucket, name, topic, err)
	}
	return nil
}

// finalizeNotification is the Pub/Sub message GCS publishes when an object
// generation is finalized: the notification attributes and, as the body,
// the object resource with its int64 fields as strings.
func finalizeNotification(attrs *storage.ObjectAttrs, now time.Time) (*pubsub.Message, error) {
	crc := make([]byte, 4)
	binary.BigEndian.PutUint32(crc, attrs.CRC32C)
	gen := strconv.FormatInt(attrs.Generation, 10)
	body, err := json.Marshal(map[string]string{
		"kind":         "storage#object",
		"id":           attrs.Bucket + "/" + attrs.Name + "/" + gen,
		"name":         attrs.Name,
		"bucket":       attrs.Bucket,
		"generation":   gen,
		"contentType":  attrs.ContentType,
		"timeCreated":  attrs.Created.UTC().Format(time.RFC3339Nano),
		"updated":      attrs.Updated.UTC().Format(time.RFC3339Nano),
		"storageClass": "STANDARD",
		"size":         strconv.FormatInt(attrs.Size, 10),
		"md5Hash":      base64.StdEncoding.EncodeToString(attrs.MD5),
		"crc32c":       base64.StdEncoding.EncodeToString(crc),
	})
	if err != nil {
		return nil, err
	}
	return &pubsub.Message{Data: body, Attributes: map[string]string{
		"bucketId":         attrs.Bucket,
		"objectId":         attrs.Name,
		"objectGeneration": gen,
		"eventType":        "OBJECT_FINALIZE",
		"eventTime":        now.UTC().Format(time.RFC3339),
		"payloadFormat":    "JSON_API_V1",
	}}, nil
}
