package onfile

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/gcp"
	"github.com/dsdelta/dsdelta/shared/pipeline"
)

// Services is what the handler uses of a function instance; *gcp.Services
// provides it, and tests fake it.
type Services interface {
	// Stage is pipeline.Pipeline.Stage.
	Stage(ctx context.Context, f datastream.SourceFile) (pipeline.StageResult, error)
	// InSource reports whether an object belongs to the configured source.
	InSource(bucket, name string) bool
	// PublishDeadLetter tells the dead-letter topic about a file that will
	// not be staged.
	PublishDeadLetter(ctx context.Context, d gcp.DeadLetter) error
	// Log is the instance's logger.
	Log() *slog.Logger
}

// Handler handles onfile events.
type Handler struct {
	// Services returns the instance's services, built on first use.
	Services func(context.Context) (Services, error)
}

// Handle is the CloudEvent entry point.
func (h Handler) Handle(ctx context.Context, e event.Event) error {
	svc, err := h.Services(ctx)
	if err != nil {
		return fmt.Errorf("onfile: %w", err)
	}
	log := svc.Log().With("event_id", e.ID(), "event_type", e.Type())
	f, err := datastream.ParseNotification(e.Type(), e.Data())
	if err != nil {
		// A malformed notification will never parse: acknowledge it and
		// leave a dead letter rather than retry forever.
		log.Error("unusable notification", "event", "bad_notification", "error", err)
		if derr := svc.PublishDeadLetter(ctx, gcp.DeadLetter{Reason: err.Error()}); derr != nil {
			return fmt.Errorf("onfile: dead-letter: %w", derr)
		}
		return nil
	}
	log = log.With("file", f.Name, "bucket", f.Bucket, "generation", f.Generation)
	if !svc.InSource(f.Bucket, f.Name) {
		log.Debug("object outside the configured source; ignored", "event", "skipped")
		return nil
	}
	res, err := svc.Stage(ctx, f)
	if err != nil {
		log.Error("staging failed; the platform will retry", "event", "stage_failed", "error", err)
		return err
	}
	switch {
	case res.Skipped != "":
		log.Info("file skipped", "event", "skipped", "reason", res.Skipped)
	case res.Duplicate:
		log.Info("file already staged", "event", "duplicate", "table", res.Table)
	case res.Quarantined != "":
		if err := svc.PublishDeadLetter(ctx, gcp.DeadLetter{Bucket: f.Bucket, Name: f.Name, Generation: f.Generation, Table: res.Table, Reason: res.Quarantined}); err != nil {
			// The quarantine is recorded; only the notice failed. Retrying
			// re-publishes it (Stage is idempotent for a quarantined file).
			return fmt.Errorf("onfile: dead-letter %s: %w", f.Name, err)
		}
	}
	return nil
}
