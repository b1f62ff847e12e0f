// Package merge is the merge function: on a wake-up for a table it runs
// pipeline.MergeTable, which takes the table's Firestore lease, merges
// staged batches until none is pending or the time budget is spent, and
// re-wakes the table when work remains.
package merge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/gcp"
)

// Handler handles merge wake-ups.
type Handler struct {
	Services func(context.Context) (*gcp.Services, error)
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
	table, err := Table(e)
	if err != nil {
		svc.Logger.Error("unusable wake-up; acknowledged", "event", "bad_wakeup", "event_id", e.ID(), "error", err)
		return nil
	}
	res, err := svc.Pipeline.MergeTable(ctx, table)
	if errors.Is(err, coord.ErrLeaseLost) {
		// Another instance took over; it merges what is left.
		svc.Logger.Warn("lease lost during merge; the new holder continues", "table", table, "error", err)
		return nil
	}
	if err != nil {
		svc.Logger.Error("merge failed; the platform will retry", "event", "merge_failed", "table", table, "error", err)
		return err
	}
	if res.Busy {
		// A live holder merges what is pending before it releases. A holder
		// that died keeps the table until its lease expires; acknowledging
		// would drop this wake-up, so ask the platform to redeliver it (with
		// backoff) when the lease has not been renewed lately.
		st, err := svc.Coord.Status(ctx, table)
		if err == nil && staleLease(st.LeaseExpires, time.Now(), svc.Pipeline.LeaseTTL) && (st.Pending > 0 || st.OpenBatchSeq > 0) {
			return fmt.Errorf("merge %s: lease held by %s, not renewed lately (expires %s); retry after it expires", table, st.LeaseHolder, st.LeaseExpires.Format(time.RFC3339))
		}
	}
	svc.Logger.Info("merge finished", "event", "merge_done", "table", table, "batches", res.Batches, "files", res.Files,
		"busy", res.Busy, "remaining", res.Remaining, "state_version", res.Result.StateVersion)
	return nil
}

// staleLease reports whether a lease looks abandoned: a live holder renews
// at a third of the TTL, so its expiry stays at least two thirds of a TTL
// ahead; an expiry closer than half a TTL means renewals stopped.
func staleLease(expires, now time.Time, ttl time.Duration) bool {
	if ttl <= 0 {
		ttl = 2 * time.Minute // the pipeline's default
	}
	return expires.Sub(now) < ttl/2
}
