package pipeline

import (
	"context"
	"errors"
	"fmt"
)

// MaintainAllResult reports a round of MaintainAll.
type MaintainAllResult struct {
	Tables         int // tables with registered files
	ExpiredRecords int // registry records of merged files and done batches deleted
}

// MaintainAll is the scheduled round over every table: it runs Maintain on
// each, then wakes the merge of a table that has files pending or a batch
// open (a safety net for lost wake-ups), and expires registry records older than
// RegistryRetention. A table that fails does not stop the others; the
// errors are returned together. Uses the Status and the Expirer beside what
// Maintain uses.
func (p *Pipeline) MaintainAll(ctx context.Context) (MaintainAllResult, error) {
	var out MaintainAllResult
	tables, err := p.Status.Statuses(ctx)
	if err != nil {
		return out, fmt.Errorf("list tables: %w", err)
	}
	out.Tables = len(tables)
	var errs []error
	for _, st := range tables {
		if ctx.Err() != nil {
			break
		}
		if _, err := p.Maintain(ctx, st.Table); err != nil {
			p.log().Error("maintenance failed", "event", "maintain_failed", "table", st.Table, "error", err)
			errs = append(errs, err)
		}
		// The safety net for lost wake-ups. Maintenance holds no lease, so
		// a merge woken while it runs proceeds at once; the status is read
		// again after it, to wake for files staged meanwhile too.
		if p.Waker == nil {
			continue
		}
		if cur, err := p.Status.Status(ctx, st.Table); err == nil {
			st = cur
		}
		// An open batch left by a crashed merge needs a wake-up as much as
		// pending files do: with nothing else pending, no notification
		// would ever resume it.
		if st.Pending > 0 || st.OpenBatchSeq != 0 {
			if err := p.Waker.Wake(ctx, st.Table); err != nil {
				errs = append(errs, fmt.Errorf("wake %s: %w", st.Table, err))
			}
		}
	}
	n, err := p.Expirer.Expire(ctx, p.now().Add(-p.registryRetention()))
	if err != nil {
		errs = append(errs, fmt.Errorf("expire registry: %w", err))
	}
	out.ExpiredRecords = n
	p.log().Info("compaction round done", "event", "compact_done", "tables", len(tables), "expired_records", n, "errors", len(errs))
	return out, errors.Join(errs...)
}
