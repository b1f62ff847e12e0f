package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// stagedCustomers returns a pipeline with simulated files of shop.customers
// staged (not merged), its lease TTL set to ttl.
func stagedCustomers(t *testing.T, ctx context.Context, ttl time.Duration) *Pipeline {
	t.Helper()
	sim, err := dssim.Run(dssim.Options{Seed: 11, EventsPerFile: 10, Tables: []dssim.TableSpec{
		{Source: dssim.MySQL, Database: "shop", Table: "customers", InitialRows: 10, Changes: 20},
	}})
	if err != nil {
		t.Fatal(err)
	}
	source := objstore.NewMemory()
	p := newPipeline(t, source, config.Config{})
	p.LeaseTTL = ttl
	for _, n := range write(t, ctx, source, sim.Files) {
		if _, err := p.Stage(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func TestMergeWakeUp(t *testing.T) {
	ctx := context.Background()
	const ttl = time.Minute

	t.Run("a free table is merged", func(t *testing.T) {
		p := stagedCustomers(t, ctx, ttl)
		res, err := p.MergeWakeUp(ctx, "shop.customers")
		if err != nil || res.Busy || res.Files == 0 {
			t.Fatalf("MergeWakeUp = %+v, %v; want files merged", res, err)
		}
	})

	t.Run("a table kept by a holder that stopped renewing, with files pending, asks for the wake-up again", func(t *testing.T) {
		p := stagedCustomers(t, ctx, ttl)
		// A holder renews at a third of the TTL; one that expires in less
		// than half a TTL has stopped.
		if _, err := p.Leaser.Acquire(ctx, "shop.customers", "dead-instance/1", ttl/3); err != nil {
			t.Fatal(err)
		}
		res, err := p.MergeWakeUp(ctx, "shop.customers")
		if !errors.Is(err, ErrLeaseStale) || !res.Busy {
			t.Fatalf("MergeWakeUp = %+v, %v; want busy and ErrLeaseStale", res, err)
		}
		if !strings.Contains(err.Error(), "dead-instance/1") {
			t.Fatalf("error %q does not name the holder", err)
		}
	})

	t.Run("a table whose holder renews is left to it", func(t *testing.T) {
		p := stagedCustomers(t, ctx, ttl)
		if _, err := p.Leaser.Acquire(ctx, "shop.customers", "live-instance/1", ttl); err != nil {
			t.Fatal(err)
		}
		if res, err := p.MergeWakeUp(ctx, "shop.customers"); err != nil || !res.Busy {
			t.Fatalf("MergeWakeUp = %+v, %v; want busy and no error", res, err)
		}
	})

	t.Run("a table with nothing pending is left to a stale holder", func(t *testing.T) {
		p := stagedCustomers(t, ctx, ttl)
		if _, err := p.MergeTable(ctx, "shop.customers"); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Leaser.Acquire(ctx, "shop.customers", "dead-instance/1", ttl/3); err != nil {
			t.Fatal(err)
		}
		if res, err := p.MergeWakeUp(ctx, "shop.customers"); err != nil || !res.Busy {
			t.Fatalf("MergeWakeUp = %+v, %v; want busy and no error", res, err)
		}
	})
}

func TestStaleLease(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ttl := 90 * time.Second
	for _, c := range []struct {
		name    string
		expires time.Time
		want    bool
	}{
		{"a lease renewed a moment ago is live", now.Add(85 * time.Second), false},
		{"a lease due for renewal is still live", now.Add(60 * time.Second), false},
		{"a lease not renewed for over a TTL/2 looks abandoned", now.Add(40 * time.Second), true},
		{"an expired lease is abandoned", now.Add(-time.Second), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := staleLease(c.expires, now, ttl); got != c.want {
				t.Fatalf("staleLease = %v, want %v", got, c.want)
			}
		})
	}
}

// lostLease is Batches whose next batch finds the lease lost, as a
// renewal that came too late leaves it.
type lostLease struct{ Batches }

func (lostLease) NextBatch(context.Context, Lease, string, coord.BatchLimits) (coord.Batch, error) {
	return coord.Batch{}, coord.ErrLeaseLost
}

// A merge that loses its lease wakes the table: the wake-ups that came
// while it held the lease were answered busy, and its lease may have
// expired with nobody taking over.
func TestALostLeaseWakesTheTable(t *testing.T) {
	ctx := context.Background()
	p := stagedCustomers(t, ctx, time.Minute)
	w := &wakes{}
	p.Waker = w
	p.Batches = lostLease{p.Batches}
	_, err := p.MergeTable(ctx, "shop.customers")
	if !errors.Is(err, coord.ErrLeaseLost) {
		t.Fatalf("MergeTable error %v, want ErrLeaseLost", err)
	}
	if len(w.tables) != 1 || w.tables[0] != "shop.customers" {
		t.Fatalf("woken %v, want shop.customers once", w.tables)
	}
}
