package opcount

import (
	"context"
	"log/slog"
	"sync/atomic"
)

// Kind is a kind of billable call.
type Kind int

// The kinds of calls, by the price list that bills them.
const (
	// GCSClassA is a Cloud Storage class A operation: an object write, a
	// copy (rewrite), a page of a listing.
	GCSClassA Kind = iota
	// GCSClassB is a Cloud Storage class B operation: an object read or a
	// metadata read. Deletes are free and not counted.
	GCSClassB
	// FirestoreRead is a Firestore document read; a query that returns no
	// document is billed one.
	FirestoreRead
	// FirestoreWrite is a Firestore document write (create, set, update).
	FirestoreWrite
	// FirestoreDelete is a Firestore document delete.
	FirestoreDelete
	// PubSubPublish is one message published to Pub/Sub.
	PubSubPublish
	// FirestoreRetry is a Firestore transaction attempt that aborted on
	// contention and ran again: its reads are billed (and counted as
	// FirestoreRead), its writes are not (and not counted).
	FirestoreRetry
	numKinds
)

// Counter counts calls by kind; it is safe for concurrent use. The zero
// value is ready, and a nil *Counter counts nothing.
type Counter struct {
	n      [numKinds]atomic.Int64
	parent *Counter
}

// Add adds n calls of kind k to c and to the counters c was started in.
func (c *Counter) Add(k Kind, n int64) {
	for x := c; x != nil; x = x.parent {
		x.n[k].Add(n)
	}
}

// AddCounts adds every kind of n to c and to the counters c was started
// in.
func (c *Counter) AddCounts(n Counts) {
	for k, v := range map[Kind]int64{
		GCSClassA: n.GCSClassA, GCSClassB: n.GCSClassB, FirestoreRead: n.FirestoreReads, FirestoreWrite: n.FirestoreWrites,
		FirestoreDelete: n.FirestoreDeletes, PubSubPublish: n.PubSubPublishes, FirestoreRetry: n.FirestoreRetries,
	} {
		if v != 0 {
			c.Add(k, v)
		}
	}
}

// Counts returns what c has counted so far.
func (c *Counter) Counts() Counts {
	if c == nil {
		return Counts{}
	}
	return Counts{
		GCSClassA:        c.n[GCSClassA].Load(),
		GCSClassB:        c.n[GCSClassB].Load(),
		FirestoreReads:   c.n[FirestoreRead].Load(),
		FirestoreWrites:  c.n[FirestoreWrite].Load(),
		FirestoreDeletes: c.n[FirestoreDelete].Load(),
		PubSubPublishes:  c.n[PubSubPublish].Load(),
		FirestoreRetries: c.n[FirestoreRetry].Load(),
	}
}

// Counts is a snapshot of a Counter.
type Counts struct {
	GCSClassA        int64 `json:"gcs_class_a"`
	GCSClassB        int64 `json:"gcs_class_b"`
	FirestoreReads   int64 `json:"firestore_reads"`
	FirestoreWrites  int64 `json:"firestore_writes"`
	FirestoreDeletes int64 `json:"firestore_deletes"`
	PubSubPublishes  int64 `json:"pubsub_publishes"`
	FirestoreRetries int64 `json:"firestore_retries"`
}

// Add returns the sum of c and o.
func (c Counts) Add(o Counts) Counts {
	return Counts{
		GCSClassA:        c.GCSClassA + o.GCSClassA,
		GCSClassB:        c.GCSClassB + o.GCSClassB,
		FirestoreReads:   c.FirestoreReads + o.FirestoreReads,
		FirestoreWrites:  c.FirestoreWrites + o.FirestoreWrites,
		FirestoreDeletes: c.FirestoreDeletes + o.FirestoreDeletes,
		PubSubPublishes:  c.PubSubPublishes + o.PubSubPublishes,
		FirestoreRetries: c.FirestoreRetries + o.FirestoreRetries,
	}
}

// Attrs returns the counts as flat slog attributes (gcs_class_a,
// gcs_class_b, firestore_reads, firestore_writes, firestore_deletes,
// pubsub_publishes, firestore_retries), to append to a log line's
// arguments.
func (c Counts) Attrs() []any {
	return []any{
		slog.Int64("gcs_class_a", c.GCSClassA),
		slog.Int64("gcs_class_b", c.GCSClassB),
		slog.Int64("firestore_reads", c.FirestoreReads),
		slog.Int64("firestore_writes", c.FirestoreWrites),
		slog.Int64("firestore_deletes", c.FirestoreDeletes),
		slog.Int64("pubsub_publishes", c.PubSubPublishes),
		slog.Int64("firestore_retries", c.FirestoreRetries),
	}
}

type ctxKey struct{}

// Start returns a context carrying a new Counter, and the counter. What is
// counted under the new context is added to the counter ctx carried too.
func Start(ctx context.Context) (context.Context, *Counter) {
	c := &Counter{parent: From(ctx)}
	return context.WithValue(ctx, ctxKey{}, c), c
}

// From returns the Counter ctx carries, or nil.
func From(ctx context.Context) *Counter {
	c, _ := ctx.Value(ctxKey{}).(*Counter)
	return c
}

// Add adds n calls of kind k to the Counter ctx carries, if any.
func Add(ctx context.Context, k Kind, n int64) { From(ctx).Add(k, n) }

// Without returns a context that carries no Counter, for the calls of a
// backend that stands in for another service and counts as that service
// would bill (the local coordinator keeps Firestore's documents as
// objects: their object calls are not Cloud Storage's bill).
func Without(ctx context.Context) context.Context {
	if From(ctx) == nil {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, (*Counter)(nil))
}
