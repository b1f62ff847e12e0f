package pipeline

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/coord"
)

// wakes records the tables woken.
type wakes struct{ tables []string }

func (w *wakes) Wake(_ context.Context, tableID string) error {
	w.tables = append(w.tables, tableID)
	return nil
}

// withTable is a Status that also lists a table the registry does not know.
type withTable struct {
	base  Status
	extra string
}

func (s withTable) Statuses(ctx context.Context) ([]coord.TableStatus, error) {
	out, err := s.base.Statuses(ctx)
	return append(out, coord.TableStatus{Table: s.extra}), err
}

func (s withTable) Status(ctx context.Context, tableID string) (coord.TableStatus, error) {
	return s.base.Status(ctx, tableID)
}

func TestMaintainAll(t *testing.T) {
	ctx := context.Background()

	t.Run("a table another holder keeps, with files pending, is woken after the round", func(t *testing.T) {
		p := stagedCustomers(t, ctx, time.Minute)
		w := &wakes{}
		p.Waker = w
		if _, err := p.Leaser.Acquire(ctx, "shop.customers", "merging-instance/1", time.Minute); err != nil {
			t.Fatal(err)
		}
		res, err := p.MaintainAll(ctx)
		if err != nil {
			t.Fatalf("MaintainAll: %v", err)
		}
		if res.Tables != 1 || !slices.Equal(w.tables, []string{"shop.customers"}) {
			t.Fatalf("MaintainAll = %+v, woke %v; want 1 table, shop.customers woken once", res, w.tables)
		}
	})

	t.Run("a table Maintain woke itself is not woken twice", func(t *testing.T) {
		p := stagedCustomers(t, ctx, time.Minute)
		w := &wakes{}
		p.Waker = w
		if _, err := p.MaintainAll(ctx); err != nil || !slices.Equal(w.tables, []string{"shop.customers"}) {
			t.Fatalf("MaintainAll = %v, woke %v; want shop.customers woken once", err, w.tables)
		}
	})

	t.Run("a table with nothing pending is not woken", func(t *testing.T) {
		p := stagedCustomers(t, ctx, time.Minute)
		if _, err := p.MergeTable(ctx, "shop.customers"); err != nil {
			t.Fatal(err)
		}
		w := &wakes{}
		p.Waker = w
		if _, err := p.MaintainAll(ctx); err != nil || len(w.tables) != 0 {
			t.Fatalf("MaintainAll = %v, woke %v; want nil and no wake-up", err, w.tables)
		}
	})

	t.Run("records of merged files past the registry retention are expired", func(t *testing.T) {
		p := stagedCustomers(t, ctx, time.Minute)
		if _, err := p.MergeTable(ctx, "shop.customers"); err != nil {
			t.Fatal(err)
		}
		merged, err := p.Registry.ListFiles(ctx, "shop.customers", coord.StateMerged)
		if err != nil || len(merged) == 0 {
			t.Fatalf("merged files %d, %v; want some", len(merged), err)
		}
		// A retention that has passed for every record: now moves on.
		p.RegistryRetention = time.Hour
		p.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
		res, err := p.MaintainAll(ctx)
		if err != nil {
			t.Fatalf("MaintainAll: %v", err)
		}
		left, err := p.Registry.ListFiles(ctx, "shop.customers", coord.StateMerged)
		if err != nil || len(left) != 0 || res.ExpiredRecords < len(merged) {
			t.Fatalf("expired %d records, %d merged files left (%v); want all %d expired", res.ExpiredRecords, len(left), err, len(merged))
		}
	})

	t.Run("the default registry retention keeps fresh records", func(t *testing.T) {
		p := stagedCustomers(t, ctx, time.Minute)
		if _, err := p.MergeTable(ctx, "shop.customers"); err != nil {
			t.Fatal(err)
		}
		p.Now = func() time.Time { return time.Now().Add(coord.DefaultRetention - time.Hour) }
		if res, err := p.MaintainAll(ctx); err != nil || res.ExpiredRecords != 0 {
			t.Fatalf("MaintainAll = %+v, %v; want nothing expired within the default retention", res, err)
		}
	})

	t.Run("a table that fails does not stop the others, and its error is returned", func(t *testing.T) {
		p := stagedCustomers(t, ctx, time.Minute)
		w := &wakes{}
		p.Waker = w
		p.Status = withTable{base: p.Status, extra: "not-a-table-id"}
		if _, err := p.Leaser.Acquire(ctx, "shop.customers", "merging-instance/1", time.Minute); err != nil {
			t.Fatal(err)
		}
		_, err := p.MaintainAll(ctx)
		if err == nil || !strings.Contains(err.Error(), "not-a-table-id") {
			t.Fatalf("MaintainAll = %v, want an error naming the bad table", err)
		}
		if !slices.Equal(w.tables, []string{"shop.customers"}) {
			t.Fatalf("woke %v, want shop.customers woken despite the other table's failure", w.tables)
		}
	})
}
