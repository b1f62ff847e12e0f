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

// Handler handles the ticks of the maintenance schedule: each runs one
// round of pipeline.MaintainAll, of which compaction is one part.
type Handler struct {
	// Services returns the instance's services, built on first use.
	Services func(context.Context) (Services, error)
}

// Handle is the CloudEvent entry point: one maintenance round.
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
