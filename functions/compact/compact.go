// Package compact is the scheduled maintenance function: for every table
// with a free lease it runs pipeline.Maintain (compaction, checkpoints,
// vacuum, log cleanup, tombstone and staging expiry), re-wakes tables that
// have pending files or an open batch (a safety net for lost wake-ups) and
// expires old registry records.
package compact

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/dsdelta/dsdelta/shared/gcp"
)

// Handler handles compaction ticks.
type Handler struct {
	Services func(context.Context) (*gcp.Services, error)
	// RegistryRetention keeps merged file records this long (default 7 days).
	RegistryRetention time.Duration
}

// Handle is the CloudEvent entry point.
func (h Handler) Handle(ctx context.Context, e event.Event) error {
	svc, err := h.Services(ctx)
	if err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	tables, err := svc.Coord.Tables(ctx)
	if err != nil {
		return fmt.Errorf("compact: list tables: %w", err)
	}
	var errs []error
	for _, st := range tables {
		if ctx.Err() != nil {
			break
		}
		res, err := svc.Pipeline.Maintain(ctx, st.Table)
		if err != nil {
			svc.Logger.Error("maintenance failed", "event", "maintain_failed", "table", st.Table, "error", err)
			errs = append(errs, err)
		} else if res.Busy {
			svc.Logger.Info("table busy; maintenance skipped this round", "table", st.Table)
		}
		// Wake after maintenance, not before: a merge woken while
		// Maintain holds the lease finds the table busy and drops the
		// wake-up, so waking first would lose it on every round. Maintain
		// itself wakes the table as soon as it releases the lease (Woke);
		// this wake is for a table it did not wake (nothing was pending
		// then, or it skipped or failed on the table).
		if res.Woke || svc.Pipeline.Waker == nil {
			continue
		}
		if cur, err := svc.Coord.Status(ctx, st.Table); err == nil {
			st = cur
		}
		// An open batch left by a crashed merge needs a wake-up as much as
		// pending files do: with nothing else pending, no notification
		// would ever resume it.
		if st.Pending > 0 || st.OpenBatchSeq != 0 {
			if err := svc.Pipeline.Waker.Wake(ctx, st.Table); err != nil {
				errs = append(errs, fmt.Errorf("wake %s: %w", st.Table, err))
			}
		}
	}
	retention := h.RegistryRetention
	if retention <= 0 {
		retention = 7 * 24 * time.Hour
	}
	n, err := svc.Coord.Expire(ctx, time.Now().Add(-retention))
	if err != nil {
		errs = append(errs, fmt.Errorf("expire registry: %w", err))
	}
	svc.Logger.Info("compaction round done", "event", "compact_done", "tables", len(tables), "expired_records", n, "errors", len(errs))
	return errors.Join(errs...)
}
