package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/parquet-go/parquet-go"
)

// rgGroups returns the row count of each row group of a written data file.
func rgGroups(t *testing.T, store *pqMemStore, add Add) []int {
	t.Helper()
	f, _ := rwRowGroups(t, store, add)
	var out []int
	for _, rg := range f.RowGroups() {
		out = append(out, int(rg.NumRows()))
	}
	if len(out) < 4 {
		t.Fatalf("source has %d row groups, the test needs several", len(out))
	}
	return out
}

// rgDataBounds is the min and max of the non-null values of column col in
// rows; ok is false when every value is null.
func rgDataBounds(rows [][]any, col int) (lo, hi any, ok bool) {
	for _, r := range rows {
		v := r[col]
		if v == nil {
			continue
		}
		if !ok || value.Compare(v, lo) < 0 {
			lo = v
		}
		if !ok || value.Compare(v, hi) > 0 {
			hi = v
		}
		ok = true
	}
	return lo, hi, ok
}

// rgCorrupt overwrites the pages of every column chunk of the given row
// groups, so reading any of them fails.
func rgCorrupt(t *testing.T, store *pqMemStore, add Add, groups []int) {
	t.Helper()
	name, err := decodeAddPath(add.Path)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := rwRowGroups(t, store, add)
	data := bytes.Clone(store.objects[name])
	for _, g := range groups {
		for col := range f.Metadata().RowGroups[g].Columns {
			cm := f.Metadata().RowGroups[g].Columns[col].MetaData
			start := cm.DataPageOffset
			if cm.DictionaryPageOffset > 0 && cm.DictionaryPageOffset < start {
				start = cm.DictionaryPageOffset
			}
			for i := start; i < start+cm.TotalCompressedSize; i++ {
				data[i] = 0xff
			}
		}
	}
	store.objects[name] = data
}

func TestReadFileRowGroupFilterSkipsTheRowGroupsItRejects(t *testing.T) {
	schema := rwSchema()
	col := func(name string) int { return schema.Index(name) }
	for _, tc := range []struct {
		name   string
		column string
		keep   func(lo, hi any) bool
		// skips: the filter is consulted (false: the column's bounds are
		// not trusted and every row group is read).
		skips bool
	}{
		{"a long key range keeps only the row groups that overlap it", "id", func(lo, hi any) bool {
			return value.Compare(lo, int64(310)) <= 0 && value.Compare(hi, int64(300)) >= 0
		}, true},
		{"a long key range spanning row groups keeps each of them", "id", func(lo, hi any) bool {
			return value.Compare(lo, int64(700)) <= 0 && value.Compare(hi, int64(250)) >= 0
		}, true},
		{"a timestamp filter gets microsecond bounds and nulls follow their row group", "ts", func(lo, hi any) bool {
			return value.Compare(hi, value.Micros(1_700_000_000_000_000+400*1_000_003)) < 0
		}, true},
		{"a string column of a dsdelta file is filtered on exact bounds", "name", func(lo, hi any) bool {
			return value.Compare(lo, "name-00500") <= 0 && value.Compare(hi, "name-00500") >= 0
		}, true},
		{"a short column is filtered on its bounds", "small", func(lo, hi any) bool {
			return value.Compare(hi, int16(140)) >= 0
		}, true},
		{"a double column is never filtered", "score", func(lo, hi any) bool { return false }, false},
		{"a decimal column is never filtered", "amount", func(lo, hi any) bool { return false }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newPQMemStore()
			md, add, rows := rwSource(t, store, false)
			sizes := rgGroups(t, store, add)
			c := col(tc.column)
			var want [][]any
			var skipped []int
			first := 0
			for g, n := range sizes {
				group := rows[first : first+n]
				first += n
				lo, hi, ok := rgDataBounds(group, c)
				if !tc.skips || !ok || tc.keep(lo, hi) {
					want = append(want, group...)
				} else {
					skipped = append(skipped, g)
				}
			}
			if tc.skips && (len(skipped) == 0 || len(skipped) == len(sizes)) {
				t.Fatalf("test filter skips %d of %d row groups: it must skip some and keep others", len(skipped), len(sizes))
			}
			// Pages of skipped row groups must not be read at all.
			rgCorrupt(t, store, add, skipped)
			if len(skipped) > 0 {
				err := ReadFile(context.Background(), store, md, add, ReadOptions{}, func([]any) error { return nil })
				if err == nil {
					t.Fatal("an unfiltered read of the corrupted row groups succeeded: the test proves nothing")
				}
			}
			calls := 0
			var got [][]any
			err := ReadFile(context.Background(), store, md, add, ReadOptions{RowGroupFilter: &RowGroupFilter{Column: tc.column, Keep: func(lo, hi any) bool {
				calls++
				// The bounds must be exact: some row group's data has them.
				return tc.keep(lo, hi)
			}}}, func(r []any) error {
				got = append(got, r)
				return nil
			})
			if err != nil {
				t.Fatalf("ReadFile: %v", err)
			}
			if !tc.skips && calls != 0 {
				t.Errorf("Keep called %d times for an untrusted column type", calls)
			}
			if tc.skips && calls != len(sizes) {
				t.Errorf("Keep called %d times, want once per row group (%d)", calls, len(sizes))
			}
			if g, w := pqRowsJSON(t, schema, got), pqRowsJSON(t, schema, want); !slices.Equal(g, w) {
				t.Errorf("read %d rows, want %d (contents differ)", len(g), len(w))
			}
		})
	}
}

func TestReadFileRowGroupFilterPassesTheExactBoundsOfEachRowGroup(t *testing.T) {
	schema := rwSchema()
	store := newPQMemStore()
	md, add, rows := rwSource(t, store, false)
	sizes := rgGroups(t, store, add)
	for _, column := range []string{"id", "name", "ts", "day", "small"} {
		t.Run(column+" bounds equal the min and max of the row group's values", func(t *testing.T) {
			c := schema.Index(column)
			var want, got []string
			first := 0
			for _, n := range sizes {
				lo, hi, ok := rgDataBounds(rows[first:first+n], c)
				first += n
				if ok {
					want = append(want, fmt.Sprintf("%T %v..%v", lo, lo, hi))
				}
			}
			err := ReadFile(context.Background(), store, md, add, ReadOptions{Columns: []string{"id"}, RowGroupFilter: &RowGroupFilter{Column: column, Keep: func(lo, hi any) bool {
				got = append(got, fmt.Sprintf("%T %v..%v", lo, lo, hi))
				return true
			}}}, func([]any) error { return nil })
			if err != nil {
				t.Fatalf("ReadFile: %v", err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("bounds passed to Keep:\n%v\nwant\n%v", got, want)
			}
		})
	}
}

func TestReadFileRowGroupFilterKeepsDeletionVectorRowsAligned(t *testing.T) {
	schema := rwSchema()
	store := newPQMemStore()
	md, add, rows := rwSource(t, store, false)
	sizes := rgGroups(t, store, add)
	deleted := []uint64{3, 200, 600, 601, 900, uint64(len(rows) - 1)}
	add.DeletionVector = pqInlineDV(t, deleted)
	const from = 500 // keep the row groups that can hold an id >= from
	var want [][]any
	first := 0
	for _, n := range sizes {
		group := rows[first : first+n]
		first += n
		if group[n-1][0].(int64) < from {
			continue
		}
		for _, r := range group {
			if !slices.Contains(deleted, uint64(r[0].(int64))) {
				want = append(want, r)
			}
		}
	}
	if len(want) == 0 || len(want) >= len(rows)-len(deleted) {
		t.Fatalf("test filter keeps %d rows: it must skip some row groups", len(want))
	}
	got := pqRead(t, store, md, add, ReadOptions{RowGroupFilter: &RowGroupFilter{Column: "id", Keep: func(lo, hi any) bool {
		return hi.(int64) >= from
	}}})
	if g, w := pqRowsJSON(t, schema, got), pqRowsJSON(t, schema, want); !slices.Equal(g, w) {
		t.Errorf("read %d rows, want %d (contents differ)", len(g), len(w))
	}
}

func TestReadFileRowGroupFilterNeverSkipsWithoutUsableBounds(t *testing.T) {
	t.Run("a partition column has no bounds in the file and every row is read", func(t *testing.T) {
		store := newPQMemStore()
		md, add, rows := rwSource(t, store, true)
		calls := 0
		got := pqRead(t, store, md, add, ReadOptions{RowGroupFilter: &RowGroupFilter{Column: "region", Keep: func(lo, hi any) bool {
			calls++
			return false
		}}})
		if len(got) != len(rows) || calls != 0 {
			t.Errorf("read %d rows with %d Keep calls, want %d rows and none", len(got), calls, len(rows))
		}
	})
	t.Run("an unknown filter column is an error", func(t *testing.T) {
		store := newPQMemStore()
		md, add, _ := rwSource(t, store, false)
		err := ReadFile(context.Background(), store, md, add, ReadOptions{RowGroupFilter: &RowGroupFilter{Column: "nope", Keep: func(lo, hi any) bool { return true }}}, func([]any) error { return nil })
		if !errors.Is(err, ErrUnknownColumn) {
			t.Errorf("err = %v, want ErrUnknownColumn", err)
		}
	})
}

// rgForeignFile writes a file as another writer would (not created by
// dsdelta): a string column, a signed and an unsigned integer, and a
// millisecond timestamp, in two row groups.
func rgForeignFile(t *testing.T, store *pqMemStore) (Metadata, Add) {
	t.Helper()
	pschema := parquet.NewSchema("spark_schema", parquet.Group{
		"s":  parquet.String(),
		"i":  parquet.Leaf(parquet.Int64Type),
		"u":  parquet.Uint(32),
		"ts": parquet.Timestamp(parquet.Millisecond),
	})
	var buf bytes.Buffer
	w := parquet.NewWriter(&buf, pschema, parquet.CreatedBy("parquet-mr", "1.13.1", "x"))
	for g := range 2 {
		for i := range 10 {
			n := g*10 + i
			// Columns are in the schema's (sorted) order: i, s, ts, u.
			row := parquet.Row{
				parquet.Int64Value(int64(n)).Level(0, 0, 0),
				parquet.ByteArrayValue([]byte(fmt.Sprintf("s%02d", n))).Level(0, 0, 1),
				parquet.Int64Value(int64(1_000+n)).Level(0, 0, 2),
				parquet.Int32Value(int32(n)).Level(0, 0, 3),
			}
			if _, err := w.WriteRows([]parquet.Row{row}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	store.objects["foreign.parquet"] = buf.Bytes()
	schema := value.StructType{Fields: []value.Field{
		{Name: "s", Type: value.String, Nullable: false},
		{Name: "i", Type: value.Long, Nullable: false},
		{Name: "u", Type: value.Long, Nullable: false},
		{Name: "ts", Type: value.Timestamp, Nullable: false},
	}}
	return pqMetadata(schema, nil, nil), Add{Path: "foreign.parquet", Size: int64(buf.Len())}
}

func TestReadFileRowGroupFilterTrustsOnlyExactBoundsOfOtherWriters(t *testing.T) {
	for _, tc := range []struct {
		name, column string
		want         []string // bounds passed to Keep, one per row group; none: not trusted
	}{
		{"a signed integer column is filtered", "i", []string{"int64 0..9", "int64 10..19"}},
		{"a millisecond timestamp is filtered on bounds converted to micros", "ts", []string{"value.Micros 1000000..1009000", "value.Micros 1010000..1019000"}},
		{"a string column of another writer is never filtered (its bounds may be truncated)", "s", nil},
		{"an unsigned integer column is never filtered (its bounds order unsigned)", "u", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newPQMemStore()
			md, add := rgForeignFile(t, store)
			var got []string
			rows := pqRead(t, store, md, add, ReadOptions{RowGroupFilter: &RowGroupFilter{Column: tc.column, Keep: func(lo, hi any) bool {
				got = append(got, fmt.Sprintf("%T %v..%v", lo, int64Of(lo), int64Of(hi)))
				return false
			}}})
			if !slices.Equal(got, tc.want) {
				t.Errorf("bounds passed to Keep = %v, want %v", got, tc.want)
			}
			wantRows := 20
			if tc.want != nil {
				wantRows = 0 // Keep rejected every row group
			}
			if len(rows) != wantRows {
				t.Errorf("read %d rows, want %d", len(rows), wantRows)
			}
		})
	}
}

func int64Of(v any) any {
	if m, ok := v.(value.Micros); ok {
		return int64(m)
	}
	return v
}

func TestRewriteFileRowGroupFilterSkipsReadingKeysOfRejectedRowGroups(t *testing.T) {
	schema := rwSchema()
	dropped := map[int64]bool{300: true, 301: true, 640: true}
	keep := func(lo, hi any) bool {
		for id := range dropped {
			if value.Compare(lo, id) <= 0 && value.Compare(hi, id) >= 0 {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		name string
		part bool
	}{
		{"an unpartitioned file rewrites the same with and without the filter", false},
		{"a partitioned file rewrites the same with and without the filter", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sizes []int
			run := func(filter *RowGroupFilter) (RewriteResult, [][]any, int) {
				store := newPQMemStore()
				md, add, _ := rwSource(t, store, tc.part)
				sizes = rgGroups(t, store, add)
				var partCols []string
				if tc.part {
					partCols = []string{"region"}
				}
				drops := 0
				res, err := RewriteFile(context.Background(), store, md, add, RewriteOptions{
					Write: WriteOptions{Schema: schema, PartitionColumns: partCols, RowGroupBytes: 1},
					Keys:  []string{"id", "region"},
					Drop: func(k []any) bool {
						drops++
						return dropped[k[0].(int64)]
					},
					RowGroupFilter: filter,
				})
				if err != nil {
					t.Fatalf("RewriteFile: %v", err)
				}
				if len(res.Adds) != 1 {
					t.Fatalf("wrote %d files, want 1", len(res.Adds))
				}
				return res, pqRead(t, store, md, res.Adds[0], ReadOptions{}), drops
			}
			plain, plainRows, plainDrops := run(nil)
			filtered, filteredRows, filteredDrops := run(&RowGroupFilter{Column: "id", Keep: keep})
			if plain.Rows != filtered.Rows || plain.Dropped != filtered.Dropped || filtered.Dropped != int64(len(dropped)) {
				t.Errorf("rows/dropped = %d/%d with the filter, %d/%d without, want %d dropped", filtered.Rows, filtered.Dropped, plain.Rows, plain.Dropped, len(dropped))
			}
			if plain.RowGroupsCopied != filtered.RowGroupsCopied || plain.RowGroupsDecoded != filtered.RowGroupsDecoded || filtered.RowGroupsDecoded != 2 {
				t.Errorf("copied/decoded = %d/%d with the filter, %d/%d without, want 2 decoded", filtered.RowGroupsCopied, filtered.RowGroupsDecoded, plain.RowGroupsCopied, plain.RowGroupsDecoded)
			}
			if g, w := pqRowsJSON(t, schema, filteredRows), pqRowsJSON(t, schema, plainRows); !slices.Equal(g, w) {
				t.Errorf("filtered rewrite holds %d rows, plain %d (contents differ)", len(g), len(w))
			}
			if filtered.Adds[0].Stats != plain.Adds[0].Stats {
				t.Errorf("stats differ:\nfiltered %s\nplain    %s", filtered.Adds[0].Stats, plain.Adds[0].Stats)
			}
			if plainDrops != rwRows {
				t.Errorf("without the filter Drop saw %d keys, want every row (%d)", plainDrops, rwRows)
			}
			// Only the row groups holding dropped ids have their keys read.
			wantDrops, first := 0, 0
			for _, n := range sizes {
				for id := range dropped {
					if id >= int64(first) && id < int64(first+n) {
						wantDrops += n
						break
					}
				}
				first += n
			}
			if filteredDrops != wantDrops {
				t.Errorf("with the filter Drop saw %d keys, want %d (the row groups holding dropped ids)", filteredDrops, wantDrops)
			}
		})
	}
	t.Run("an unknown filter column is an error", func(t *testing.T) {
		store := newPQMemStore()
		md, add, _ := rwSource(t, store, false)
		_, err := RewriteFile(context.Background(), store, md, add, RewriteOptions{
			Write: WriteOptions{Schema: schema}, Keys: []string{"id"},
			RowGroupFilter: &RowGroupFilter{Column: "nope", Keep: keep},
		})
		if !errors.Is(err, ErrUnknownColumn) {
			t.Errorf("err = %v, want ErrUnknownColumn", err)
		}
	})
}
