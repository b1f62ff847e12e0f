package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/dsdelta/dsdelta/shared/parquetfile"
	"github.com/dsdelta/dsdelta/shared/value"
)

// repairTable is a table of extremesSchema with one file of its 1000
// rows, committed with the stats damage gives; it returns the file.
func repairTable(t *testing.T, ctx context.Context, store *pqMemStore, damage func(*testing.T, *pqMemStore, *Add)) Add {
	t.Helper()
	schema := extremesSchema()
	if _, err := Create(ctx, store, CreateOptions{Schema: schema}); err != nil {
		t.Fatal(err)
	}
	add := pqWriteRows(t, store, WriteOptions{Schema: schema, RowGroupBytes: 1, DataChange: true}, 1000, extremesRow)
	if damage != nil {
		damage(t, store, &add)
	}
	snap := mustSnapshot(t, Open(store))
	tx := snap.NewTransaction(Operation{Name: "WRITE"})
	tx.Add(add)
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return add
}

// widenBounds gives add the bounds an older release's rewrite left after
// dropping the rows holding the extremes: values no row has.
func widenBounds(t *testing.T, _ *pqMemStore, add *Add) {
	st, err := ParseStats(add.Stats)
	if err != nil {
		t.Fatal(err)
	}
	st.MinValues["d"], st.MaxValues["d"] = json.RawMessage("-5e9"), json.RawMessage("5e9")
	st.MinValues["w"] = json.RawMessage("-99999999999.999")
	b, _ := json.Marshal(st)
	add.Stats = string(b)
}

// unsignedFooter puts in place of add's file the same rows as parquet-go
// before v0.32.1 wrote them, with its chunk statistics of the wide
// decimal in unsigned byte order (see v0320File): its row groups of 20
// rows hold values of both signs.
func unsignedFooter(t *testing.T, store *pqMemStore, add *Add) {
	v0320File(t, store, pqMetadata(extremesSchema(), nil, nil), add, "unsigned-decimal-footer.parquet")
	b := store.objects[add.Path]
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)), parquet.SkipPageIndex(true))
	if err != nil {
		t.Fatal(err)
	}
	for _, rg := range f.Metadata().RowGroups {
		if unsignedDecimalStats(&rg.Columns[3].MetaData.Statistics) {
			return
		}
	}
	t.Fatal("no row group has unsigned decimal bounds: the test must exercise them")
}

// TestRepairStats: a file whose add.stats claims bounds no row has gets
// them restated, its data untouched; a file whose footer has unsigned
// wide-decimal bounds (parquet-go's before v0.32.1) is rewritten without
// them; the repair commits once, a dry run not at all, and a clean table
// (whose wide decimal has footer bounds in signed order) is left alone.
func TestRepairStats(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name              string
		damage            func(*testing.T, *pqMemStore, *Add)
		restated, rewrite bool
	}{
		{"a clean table is left alone", nil, false, false},
		{"bounds no row has are restated", widenBounds, true, false},
		{"unsigned wide-decimal footer bounds are rewritten", unsignedFooter, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newPQMemStore()
			add := repairTable(t, ctx, store, tc.damage)
			_, before := readRows(t, ctx, store)
			rows := pqRead(t, store, before.Metadata(), add, ReadOptions{})

			dry, err := before.RepairStats(ctx, RepairStatsOptions{DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			if dry.FilesChecked != 1 || (len(dry.Restated) == 1) != tc.restated || (len(dry.Rewritten) == 1) != tc.rewrite || dry.Version != 0 {
				t.Fatalf("dry run = %+v", dry)
			}
			if v := mustSnapshot(t, Open(store)).Version(); v != before.Version() {
				t.Fatalf("a dry run committed version %d", v)
			}
			res, err := before.RepairStats(ctx, RepairStatsOptions{})
			if err != nil {
				t.Fatal(err)
			}
			after := mustSnapshot(t, Open(store))
			if !tc.restated && !tc.rewrite {
				if res.Version != 0 || after.Version() != before.Version() {
					t.Fatalf("a clean table got version %d (%+v)", after.Version(), res)
				}
				return
			}
			if res.Version != before.Version()+1 || after.Version() != res.Version {
				t.Fatalf("repair = %+v, table at version %d", res, after.Version())
			}
			var got [][]any
			for _, f := range after.Files() {
				if tc.restated && f.Path != add.Path {
					t.Errorf("a restated file was rewritten: %s", f.Path)
				}
				got = append(got, pqRead(t, store, after.Metadata(), f, ReadOptions{})...)
				st, err := ParseStats(f.Stats)
				if err != nil {
					t.Fatal(err)
				}
				for _, fld := range extremesSchema().Fields {
					lo, hi, ok := st.MinMax(fld.Name, fld.Type)
					want := map[string][2]any{"d": {-1e9, 1e9}, "w": {pqDec("-9999999999.999"), pqDec("9999999999.999")}}[fld.Name]
					if want[0] != nil && (!ok || value.Compare(lo, want[0]) != 0 || value.Compare(hi, want[1]) != 0) {
						t.Errorf("%s: bounds [%v, %v] (present %v), want %v", fld.Name, lo, hi, ok, want)
					}
				}
				if tc.rewrite {
					name, _ := decodeAddPath(f.Path)
					ra, err := parquetfile.Open(ctx, store, name, f.Size)
					if err != nil {
						t.Fatal(err)
					}
					pf := ra.Parquet()
					for g, rg := range pf.Metadata().RowGroups {
						if s := rg.Columns[3].MetaData.Statistics; unsignedDecimalStats(&s) {
							t.Fatalf("row group %d of the rewrite keeps the decimal's unsigned footer bounds % x, % x", g, s.MinValue, s.MaxValue)
						}
					}
				}
			}
			if !slices.EqualFunc(got, rows, func(a, b []any) bool { return pqEqual(a, b) }) {
				t.Errorf("the repair changed the rows: %d, want %d", len(got), len(rows))
			}
			again, err := after.RepairStats(ctx, RepairStatsOptions{})
			if err != nil || again.Version != 0 || len(again.Restated)+len(again.Rewritten) != 0 {
				t.Fatalf("a second repair = %+v, %v; want nothing to do", again, err)
			}
		})
	}
}
