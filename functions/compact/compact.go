// Package compact is the scheduled maintenance function: it runs
// pipeline.MaintainAll, which maintains every table whose lease is free
// (compaction, checkpoints, vacuum, log cleanup, tombstone and staging
// expiry), re-wakes tables that have pending files or an open batch (a
// safety net for lost wake-ups) and expires old registry records.
package compact

import (
	"context"
	"fmt"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/dsdelta/dsdelta/shared/pipeline"
)

// Services is what the handler uses of a function instance; *gcp.Services
// provides it, and tests fake it.
type Services interface {
	// MaintainAll is pipeline.Pipeline.MaintainAll.
	MaintainAll(ctx context.Context) (pipeline.MaintainAllResult, error)
}

// Handler handles compaction ticks.
type Handler struct {
	// Services returns the instance's services, built on first use.
	Services func(context.Context) (Services, error)
}

// Handle is the CloudEvent entry point.
func (h Handler) Handle(ctx context.Context, e event.Event) error {
	svc, err := h.Services(ctx)
	if err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	if _, err := svc.MaintainAll(ctx); err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	return nil
}
