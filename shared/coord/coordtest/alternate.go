package coordtest

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/dsdelta/dsdelta/shared/coord"
)

// Alternate returns a Coordinator that sends each call to the next of cs in
// turn. Over several instances sharing one store it plays several processes
// working on the same tables, call by call.
func Alternate(cs ...Coordinator) Coordinator {
	return &alternate{cs: cs}
}

type alternate struct {
	cs   []Coordinator
	next atomic.Uint64
}

func (a *alternate) pick() Coordinator {
	return a.cs[(a.next.Add(1)-1)%uint64(len(a.cs))]
}

func (a *alternate) Acquire(ctx context.Context, tableID, holder string, ttl time.Duration) (coord.Lease, error) {
	return a.pick().Acquire(ctx, tableID, holder, ttl)
}

func (a *alternate) Renew(ctx context.Context, l coord.Lease, ttl time.Duration) (coord.Lease, error) {
	return a.pick().Renew(ctx, l, ttl)
}

func (a *alternate) Release(ctx context.Context, l coord.Lease) error {
	return a.pick().Release(ctx, l)
}

func (a *alternate) CheckLease(ctx context.Context, l coord.Lease) error {
	return a.pick().CheckLease(ctx, l)
}

func (a *alternate) RegisterFile(ctx context.Context, f coord.FileRecord) (coord.FileRecord, bool, error) {
	return a.pick().RegisterFile(ctx, f)
}

func (a *alternate) Quarantine(ctx context.Context, f coord.FileRecord, reason string) (coord.FileRecord, error) {
	return a.pick().Quarantine(ctx, f, reason)
}

func (a *alternate) File(ctx context.Context, id string) (coord.FileRecord, error) {
	return a.pick().File(ctx, id)
}

func (a *alternate) Pending(ctx context.Context, tableID string, limit int) ([]coord.FileRecord, error) {
	return a.pick().Pending(ctx, tableID, limit)
}

func (a *alternate) ListFiles(ctx context.Context, tableID string, state coord.FileState) ([]coord.FileRecord, error) {
	return a.pick().ListFiles(ctx, tableID, state)
}

func (a *alternate) NextBatch(ctx context.Context, l coord.Lease, tableID string, lim coord.BatchLimits) (coord.Batch, error) {
	return a.pick().NextBatch(ctx, l, tableID, lim)
}

func (a *alternate) CompleteBatch(ctx context.Context, l coord.Lease, b coord.Batch, stats coord.BatchStats) error {
	return a.pick().CompleteBatch(ctx, l, b, stats)
}

func (a *alternate) Statuses(ctx context.Context) ([]coord.TableStatus, error) {
	return a.pick().Statuses(ctx)
}

func (a *alternate) Status(ctx context.Context, tableID string) (coord.TableStatus, error) {
	return a.pick().Status(ctx, tableID)
}

func (a *alternate) Expire(ctx context.Context, before time.Time) (int, error) {
	return a.pick().Expire(ctx, before)
}

func (a *alternate) Skip(ctx context.Context, f coord.FileRecord, reason string) (coord.FileRecord, error) {
	return a.pick().Skip(ctx, f, reason)
}

func (a *alternate) Files(ctx context.Context, ids []string) (map[string]coord.FileRecord, error) {
	return a.pick().Files(ctx, ids)
}

func (a *alternate) Watermark(ctx context.Context, key string) ([]byte, int64, error) {
	return a.pick().Watermark(ctx, key)
}

func (a *alternate) PutWatermark(ctx context.Context, key string, data []byte, rev int64) (int64, error) {
	return a.pick().PutWatermark(ctx, key, data, rev)
}

func (a *alternate) ListWatermarks(ctx context.Context, prefix string, fn func(key string, data []byte) error) error {
	return a.pick().ListWatermarks(ctx, prefix, fn)
}
