package delta

import (
	"context"
	"fmt"
	"testing"

	"github.com/dsdelta/dsdelta/shared/value"
)

// extremesSchema has the leaves whose Parquet bounds are not their Delta
// ones (see boundsAsDelta): a float, a double and a decimal of more than
// 18 digits.
func extremesSchema() value.StructType {
	return value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.Long},
		{Name: "f", Type: value.Float, Nullable: true},
		{Name: "d", Type: value.Double, Nullable: true},
		{Name: "w", Type: value.DecimalType{Precision: 25, Scale: 3}, Nullable: true},
	}}
}

// extremesRow is row i of 1000: row 500 holds every column's minimum and
// row 900 every maximum; decimals of both signs, some nulls.
func extremesRow(i int) []any {
	row := []any{int64(i), float32(i%97) - 40, float64(i%89)/7 - 5, pqDec(fmt.Sprintf("%d.%03d", i%83-41, i%1000))}
	switch i {
	case 500:
		row[1], row[2], row[3] = float32(-1e6), -1e9, pqDec("-9999999999.999")
	case 900:
		row[1], row[2], row[3] = float32(1e6), 1e9, pqDec("9999999999.999")
	}
	if i%10 == 3 {
		row[1], row[2], row[3] = nil, nil, nil
	}
	return row
}

// TestRewriteStatsAreTheExactBoundsOfTheKeptRows: a rewrite that drops the
// rows holding a column's minimum and maximum writes the bounds of the
// rows it kept, for the float, double and wide-decimal columns too, and
// does not mark them wide: whether the kept rows' row groups are copied
// verbatim, re-encoded, or split across several output files.
func TestRewriteStatsAreTheExactBoundsOfTheKeptRows(t *testing.T) {
	for _, tc := range []struct {
		name   string
		drop   func(id int64) bool
		target int64
		// copied: some kept row groups are copied verbatim.
		copied bool
	}{
		{"the rows holding the extremes are dropped, the other row groups copied", func(id int64) bool { return id == 500 || id == 900 }, 0, true},
		{"the row groups holding the extremes are dropped whole", func(id int64) bool { return id >= 384 && id < 512 || id >= 896 }, 0, true},
		{"every row group loses a row and is re-encoded", func(id int64) bool { return id%128 == 5 || id == 500 || id == 900 }, 0, false},
		{"the output rolls into several files", func(id int64) bool { return id == 500 }, 4000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schema := extremesSchema()
			store := newPQMemStore()
			var rows [][]any
			for i := range 1000 {
				rows = append(rows, extremesRow(i))
			}
			add := pqWrite(t, store, WriteOptions{Schema: schema, RowGroupBytes: 1}, rows)
			md := pqMetadata(schema, nil, nil)
			res, err := RewriteFile(context.Background(), store, md, add, RewriteOptions{
				Write:           WriteOptions{Schema: schema},
				TargetFileBytes: tc.target,
				Keys:            []string{"id"},
				Drop:            func(k []any) bool { return tc.drop(k[0].(int64)) },
			})
			if err != nil {
				t.Fatalf("RewriteFile: %v", err)
			}
			if (res.RowGroupsCopied > 0) != tc.copied || (tc.target > 0) != (len(res.Adds) > 1) {
				t.Fatalf("%d row groups copied, %d files written: not the case under test (%+v)", res.RowGroupsCopied, len(res.Adds), res)
			}
			for _, out := range res.Adds {
				st, err := ParseStats(out.Stats)
				if err != nil {
					t.Fatal(err)
				}
				if st.TightBounds != nil && !*st.TightBounds {
					t.Errorf("%s: stats marked wide: %s", out.Path, out.Stats)
				}
				kept := pqRead(t, store, md, out, ReadOptions{})
				for i, f := range schema.Fields {
					var lo, hi any
					for _, r := range kept {
						if r[i] != nil && (lo == nil || value.Compare(r[i], lo) < 0) {
							lo = r[i]
						}
						if r[i] != nil && (hi == nil || value.Compare(r[i], hi) > 0) {
							hi = r[i]
						}
					}
					gotLo, gotHi, ok := st.MinMax(f.Name, f.Type)
					if !ok || value.Compare(gotLo, lo) != 0 || value.Compare(gotHi, hi) != 0 {
						t.Errorf("%s: %s bounds [%v, %v] (present %v), want the kept rows' [%v, %v]", out.Path, f.Name, gotLo, gotHi, ok, lo, hi)
					}
				}
			}
		})
	}
}
