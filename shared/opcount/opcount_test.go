package opcount_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/dsdelta/dsdelta/shared/opcount"
)

func TestCounters(t *testing.T) {
	t.Run("a context without a counter counts nothing and does not fail", func(t *testing.T) {
		ctx := context.Background()
		opcount.Add(ctx, opcount.GCSClassA, 1)
		if c := opcount.From(ctx).Counts(); c != (opcount.Counts{}) {
			t.Errorf("counts = %+v, want none", c)
		}
	})
	t.Run("a counter started inside another adds to both", func(t *testing.T) {
		ctx, outer := opcount.Start(context.Background())
		opcount.Add(ctx, opcount.GCSClassB, 2)
		inner, c := opcount.Start(ctx)
		opcount.Add(inner, opcount.GCSClassA, 3)
		opcount.Add(inner, opcount.FirestoreRead, 1)
		if got, want := c.Counts(), (opcount.Counts{GCSClassA: 3, FirestoreReads: 1}); got != want {
			t.Errorf("inner = %+v, want %+v", got, want)
		}
		if got, want := outer.Counts(), (opcount.Counts{GCSClassA: 3, GCSClassB: 2, FirestoreReads: 1}); got != want {
			t.Errorf("outer = %+v, want %+v", got, want)
		}
	})
	t.Run("Without hides the counter from the calls under it", func(t *testing.T) {
		ctx, c := opcount.Start(context.Background())
		opcount.Add(opcount.Without(ctx), opcount.GCSClassA, 1)
		if got := c.Counts(); got != (opcount.Counts{}) {
			t.Errorf("counts = %+v, want none", got)
		}
	})
	t.Run("concurrent adds are all counted", func(t *testing.T) {
		ctx, c := opcount.Start(context.Background())
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 1000 {
					opcount.Add(ctx, opcount.PubSubPublish, 1)
				}
			})
		}
		wg.Wait()
		if got := c.Counts().PubSubPublishes; got != 8000 {
			t.Errorf("publishes = %d, want 8000", got)
		}
	})
}

func TestCountsAreLoggedAsFlatAttributes(t *testing.T) {
	var b strings.Builder
	log := slog.New(slog.NewTextHandler(&b, nil))
	c := opcount.Counts{GCSClassA: 1, GCSClassB: 2, FirestoreReads: 3, FirestoreWrites: 4, FirestoreDeletes: 5, PubSubPublishes: 6}
	log.Info("x", c.Add(opcount.Counts{GCSClassA: 1}).Attrs()...)
	for _, want := range []string{"gcs_class_a=2", "gcs_class_b=2", "firestore_reads=3", "firestore_writes=4", "firestore_deletes=5", "pubsub_publishes=6"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("log line %q lacks %s", b.String(), want)
		}
	}
}

// TestAddCountsAddsEveryKind: a snapshot added to a counter reaches it and
// the counters it was started in, kind by kind; a nil counter takes none.
func TestAddCountsAddsEveryKind(t *testing.T) {
	n := opcount.Counts{GCSClassA: 1, GCSClassB: 2, FirestoreReads: 3, FirestoreWrites: 4, FirestoreDeletes: 5, PubSubPublishes: 6, FirestoreRetries: 7}
	ctx, outer := opcount.Start(context.Background())
	_, inner := opcount.Start(ctx)
	inner.AddCounts(n)
	inner.AddCounts(n)
	want := n.Add(n)
	if got := inner.Counts(); got != want {
		t.Errorf("inner = %+v, want %+v", got, want)
	}
	if got := outer.Counts(); got != want {
		t.Errorf("outer = %+v, want %+v", got, want)
	}
	var none *opcount.Counter
	none.AddCounts(n)
}
