package merge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/gcp"
	"github.com/dsdelta/dsdelta/shared/pipeline"
)

// Services is what the handler uses of a function instance; *gcp.Services
// provides it, and tests fake it.
type Services interface {
	// MergeWakeUp is pipeline.Pipeline.MergeWakeUp.
	MergeWakeUp(ctx context.Context, tableID string) (pipeline.MergeResult, error)
	// Log is the instance's logger.
	Log() *slog.Logger
}

// Handler handles merge wake-ups.
type Handler struct {
	// Services returns the instance's services, built on first use.
	Services func(context.Context) (Services, error)
}

// Table extracts the table id from a wake-up: a messagePublished CloudEvent
// whose message data is {"table":"db.table"}, or that JSON directly.
func Table(e event.Event) (string, error) {
	var env struct {
		Message struct {
			Data       []byte            `json:"data"`
			Attributes map[string]string `json:"attributes"`
		} `json:"message"`
	}
	body := e.Data()
	if json.Unmarshal(body, &env) == nil && (len(env.Message.Data) > 0 || env.Message.Attributes["table"] != "") {
		if t := env.Message.Attributes["table"]; t != "" {
			return t, nil
		}
		body = env.Message.Data
	}
	var m gcp.WakeMessage
	if err := json.Unmarshal(body, &m); err != nil || m.Table == "" {
		return "", fmt.Errorf("wake-up without a table: %q", body)
	}
	if _, err := datastream.ParseTableID(m.Table); err != nil {
		return "", err
	}
	return m.Table, nil
}

// Handle is the CloudEvent entry point.
func (h Handler) Handle(ctx context.Context, e event.Event) error {
	svc, err := h.Services(ctx)
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	log := svc.Log()
	table, err := Table(e)
	if err != nil {
		log.Error("unusable wake-up; acknowledged", "event", "bad_wakeup", "event_id", e.ID(), "error", err)
		return nil
	}
	res, err := svc.MergeWakeUp(ctx, table)
	switch {
	case errors.Is(err, coord.ErrLeaseLost):
		// Taken over, or expired: the merge has woken the table again, so
		// the new holder, or the next wake-up's instance, merges what is
		// left (a wake-up that failed is an error of its own, below).
		log.Warn("lease lost during merge; the table is woken again for what is left", "table", table, "error", err)
		return nil
	case errors.Is(err, pipeline.ErrLeaseStale):
		return err // delivered again, with backoff, until the lease expires
	case err != nil:
		log.Error("merge failed; the platform will retry", "event", "merge_failed", "table", table, "error", err)
		return err
	}
	log.Info("merge finished", append([]any{"event", "merge_done", "table", table, "batches", res.Batches, "files", res.Files,
		"busy", res.Busy, "remaining", res.Remaining, "state_version", res.Result.StateVersion}, res.Ops.Attrs()...)...)
	return nil
}
