package gcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/opcount"
	"github.com/dsdelta/dsdelta/shared/pipeline"
)

// ReconciledAttribute marks a notification that the reconcile published
// for a file whose own notification never arrived.
const ReconciledAttribute = "dsdeltaReconciled"

// Reconcile runs a reconcile tick over the configured source bucket and
// prefix (pipeline.Reconcile). The files it finds are published to the
// reconcile topic as the notifications GCS would have sent, so that onfile
// instances stage them in parallel and the tick only lists and looks up;
// without a topic, the tick stages them itself within the merge budget.
func (s *Services) Reconcile(ctx context.Context) (pipeline.ReconcileResult, error) {
	if s.Env.SourceBucket == "" {
		s.Log().Warn("no source bucket configured (DSDELTA_SOURCE_BUCKET): nothing to reconcile", "event", "reconcile_skipped")
		return pipeline.ReconcileResult{Complete: true}, nil
	}
	bucket, err := s.Pipeline.Sources.Bucket(ctx, s.Env.SourceBucket)
	if err != nil {
		return pipeline.ReconcileResult{}, fmt.Errorf("reconcile: open bucket %s: %w", s.Env.SourceBucket, err)
	}
	o := pipeline.ReconcileOptions{
		Sources: s.Pipeline.Streams(pipeline.Source{Store: bucket, Bucket: s.Env.SourceBucket, Prefix: s.Env.SourcePrefix}),
		Budget:  s.Env.MergeBudget,
	}
	if s.reconcile != nil {
		o.Announce = pipeline.AnnounceFunc(s.publishFound)
	}
	return s.Pipeline.Reconcile(ctx, o)
}

// publishFound publishes a notification for each file, all at once, and
// waits for every publish.
func (s *Services) publishFound(ctx context.Context, files []datastream.SourceFile) error {
	results := make([]*pubsub.PublishResult, len(files))
	for i, f := range files {
		msg, err := FinalizeNotification(f, time.Now())
		if err != nil {
			return err
		}
		msg.Attributes[ReconciledAttribute] = "true"
		opcount.Add(ctx, opcount.PubSubPublish, 1)
		results[i] = s.reconcile.Publish(ctx, msg)
	}
	var errs []error
	for i, r := range results {
		if _, err := r.Get(ctx); err != nil {
			errs = append(errs, fmt.Errorf("publish %s: %w", files[i].Name, err))
		}
	}
	return errors.Join(errs...)
}

// FinalizeNotification is the Pub/Sub message GCS publishes when an object
// generation is finalized (payload format JSON_API_V1): the notification
// attributes and, as the body, the object resource with its int64 fields
// as strings. datastream.ParseNotification reads it back.
func FinalizeNotification(f datastream.SourceFile, now time.Time) (*pubsub.Message, error) {
	gen := strconv.FormatInt(f.Generation, 10)
	obj := map[string]string{
		"kind":       "storage#object",
		"id":         f.Bucket + "/" + f.Name + "/" + gen,
		"name":       f.Name,
		"bucket":     f.Bucket,
		"generation": gen,
		"size":       strconv.FormatInt(f.Size, 10),
	}
	if !f.Created.IsZero() {
		obj["timeCreated"] = f.Created.UTC().Format(time.RFC3339Nano)
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return &pubsub.Message{Data: body, Attributes: map[string]string{
		"bucketId":         f.Bucket,
		"objectId":         f.Name,
		"objectGeneration": gen,
		"eventType":        "OBJECT_FINALIZE",
		"eventTime":        now.UTC().Format(time.RFC3339),
		"payloadFormat":    "JSON_API_V1",
	}}, nil
}
