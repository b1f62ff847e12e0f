package cdc

import (
	"context"
	"fmt"
	"testing"

	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// BenchmarkApplyClustered merges a 10k-change batch (70% updates, 20%
// inserts, 10% deletes of recent keys) into a current-state table of
// baseRows rows, in each table mode, and reports the changes applied per
// second.
func BenchmarkApplyClustered(b *testing.B) {
	for _, mode := range []Mode{ModeCurrent, ModeSoftDelete, ModeSCD2} {
		for _, baseRows := range []int{100_000} {
			b.Run(fmt.Sprintf("mode=%s/rows=%d", mode, baseRows), func(b *testing.B) { benchApply(b, mode, baseRows) })
		}
	}
}

func benchApply(b *testing.B, mode Mode, baseRows int) {
	{
		{
			ctx := context.Background()
			base := memTablesB()
			var seed Batch
			seed.Source, seed.Key = testSource, []string{"id", "region"}
			for i := 0; i < baseRows; i++ {
				seed.Changes = append(seed.Changes, toChangeB(b, genEvent(uint64(i+1), int64(i), "eu", false, int64(i))))
			}
			if _, err := Apply(ctx, base, 1, seed, Options{Mode: mode}); err != nil {
				b.Fatal(err)
			}
			var batch Batch
			batch.Source, batch.Key = testSource, []string{"id", "region"}
			n := uint64(baseRows + 10)
			for i := 0; i < 10_000; i++ {
				n++
				switch {
				case i < 7000:
					batch.Changes = append(batch.Changes, toChangeB(b, genEvent(n, int64(baseRows-20_000+i), "eu", false, 1)))
				case i < 9000:
					batch.Changes = append(batch.Changes, toChangeB(b, genEvent(n, int64(baseRows+i), "eu", false, 2)))
				default:
					batch.Changes = append(batch.Changes, toChangeB(b, genEvent(n, int64(baseRows-30_000+i), "eu", true, 0)))
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				tabs := cloneTables(b, ctx, base)
				b.StartTimer()
				if _, err := Apply(ctx, tabs, 2, batch, Options{Mode: mode}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(batch.Changes)*b.N)/b.Elapsed().Seconds(), "changes/s")
		}
	}
}

func memTablesB() TableSet {
	root := objstore.NewMemory()
	return TableSet{ID: "db.t", State: objstore.Sub(root, "db/t"), History: objstore.Sub(root, "db/t_log"), Tombstones: objstore.Sub(root, "db/t_tombstones")}
}

func toChangeB(b *testing.B, ev datastream.Event) Change {
	c, err := ChangeFromHistory(HistoryRow(ev), testSource, []int{0, 1})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// cloneTables copies the three tables into fresh memory stores.
func cloneTables(b testing.TB, ctx context.Context, t TableSet) TableSet {
	out := memTablesB()
	for _, pair := range [][2]objstore.Store{{t.State, out.State}, {t.History, out.History}, {t.Tombstones, out.Tombstones}} {
		err := pair[0].List(ctx, "", "", func(info objstore.Info) error {
			data, err := objstore.ReadAll(ctx, pair[0], info.Name)
			if err != nil {
				return err
			}
			_, err = objstore.WriteBytes(ctx, pair[1], info.Name, data, objstore.WriteOptions{})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return out
}
