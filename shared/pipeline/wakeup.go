package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrLeaseStale is returned by MergeWakeUp when another holder keeps the
// table's lease without renewing it while work waits: the wake-up should be
// delivered again, after the lease expires.
var ErrLeaseStale = errors.New("lease not renewed lately")

// MergeWakeUp is MergeTable for a wake-up that its sender delivers again
// when asked to (Pub/Sub, with backoff). A live holder of the lease merges
// what is pending before it releases, so a busy table needs nothing more.
// But a holder that died keeps the table until its lease expires, and
// dropping the wake-up then would leave the pending files to the next
// notification; so when the lease looks abandoned while files are pending
// or a batch is open, MergeWakeUp returns ErrLeaseStale to have the
// wake-up delivered again. Uses the Status beside what MergeTable uses.
func (p *Pipeline) MergeWakeUp(ctx context.Context, tableID string) (MergeResult, error) {
	res, err := p.MergeTable(ctx, tableID)
	if err != nil || !res.Busy {
		return res, err
	}
	st, err := p.Status.Status(ctx, tableID)
	if err == nil && staleLease(st.LeaseExpires, p.now(), p.leaseTTL()) && (st.Pending > 0 || st.OpenBatchSeq > 0) {
		return res, fmt.Errorf("merge %s: lease held by %s, expires %s: %w; retry after it expires",
			tableID, st.LeaseHolder, st.LeaseExpires.Format(time.RFC3339), ErrLeaseStale)
	}
	return res, nil
}

// staleLease reports whether a lease looks abandoned: a live holder renews
// at a third of the TTL, so its expiry stays at least two thirds of a TTL
// ahead; an expiry closer than half a TTL means renewals stopped.
func staleLease(expires, now time.Time, ttl time.Duration) bool {
	return expires.Sub(now) < ttl/2
}
