package parquetfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// rwFields are the fields of rwRow: the first is no column of the file
// (as a table's partition column is not), the others are.
var rwFields = []value.Field{
	{Name: "day", Type: value.Date},
	{Name: "k", Type: value.Long},
	{Name: "op", Type: value.String},
	{Name: "s", Type: value.String, Nullable: true},
	{Name: "d", Type: value.Double, Nullable: true},
	{Name: "ts", Type: value.Timestamp},
	{Name: "b", Type: value.Binary, Nullable: true},
	{Name: "del", Type: value.Boolean, Nullable: true},
}

// rwColumns are the row positions of rwFields' columns.
var rwColumns = []int{1, 2, 3, 4, 5, 6, 7}

func rwRow(i int) []any {
	r := []any{value.Days(19000), int64(i), []string{"I", "U", "D"}[i/700%3], fmt.Sprintf("key-%06d", i*7919%100_000),
		float64(i) / 3, value.Micros(1_700_000_000_000_000 + int64(i)*1000), []byte{byte(i >> 8), byte(i)}, i%11 == 0}
	for k, f := range rwFields {
		if f.Nullable && i%(k+2) == 0 {
			r[k] = nil
		}
	}
	return r
}

func rwSchema(t testing.TB, fields []value.Field) *Schema {
	t.Helper()
	s, err := NewSchema(fields, func(f value.Field) (string, int) { return f.Name, 0 })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rwWriter starts a file of rwFields (or of fields, all of them columns).
func rwWriter(t testing.TB, store objstore.Store, name string, fields []value.Field, opts RowWriterOptions) *RowWriter {
	t.Helper()
	codec, _, err := WriteCodec("snappy")
	if err != nil {
		t.Fatal(err)
	}
	opts.Codec, opts.CreatedBy, opts.Version = codec, "test", "1"
	if opts.RowGroupBytes == 0 {
		opts.RowGroupBytes = 16 << 20
	}
	if opts.RowGroupRows == 0 {
		opts.RowGroupRows = 500
	}
	opts.Fields, opts.Columns = fields, rwColumns
	data := fields[1:]
	if len(fields) != len(rwFields) {
		opts.Columns, data = nil, fields
		for i := range fields {
			opts.Columns = append(opts.Columns, i)
		}
	}
	return NewRowWriter(context.Background(), store, name, rwSchema(t, data), opts)
}

// rwFinish finishes and commits the file of w and returns its bytes.
func rwFinish(t testing.TB, store objstore.Store, name string, w *RowWriter) []byte {
	t.Helper()
	ctx := context.Background()
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	data, err := objstore.ReadAll(ctx, store, name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// rwPerm is a permutation of 0..n-1.
func rwPerm(n int, seed uint64) []int32 {
	order := make([]int32, n)
	for i, j := range rand.New(rand.NewPCG(uint64(n), seed)).Perm(n) {
		order[i] = int32(j)
	}
	return order
}

// rwByRow is the file of rows row(0), ..., row(n-1) written one by one.
func rwByRow(t testing.TB, fields []value.Field, opts RowWriterOptions, n int, row func(int) []any) []byte {
	t.Helper()
	store := objstore.NewMemory()
	w := rwWriter(t, store, "rows.parquet", fields, opts)
	for i := range n {
		if err := w.Write(row(i)); err != nil {
			t.Fatal(err)
		}
	}
	return rwFinish(t, store, "rows.parquet", w)
}

// TestWriteInOrderWritesTheBytesWriteDoes writes rows in a random order
// (and in the order they come) through WriteInOrder and through Write,
// row by row: the files are the same bytes, flat or nested, past the
// arrays' bound, in fewer rows than a batch, and between rows written one
// by one. Check and Seen see every row once.
func TestWriteInOrderWritesTheBytesWriteDoes(t *testing.T) {
	nested := append(append([]value.Field(nil), rwFields...), value.Field{Name: "tags", Type: value.ArrayType{Element: value.String, ContainsNull: true}, Nullable: true})
	nestedRow := func(i int) []any {
		if i%3 == 0 {
			return append(rwRow(i), nil)
		}
		return append(rwRow(i), []any{fmt.Sprint("t", i), nil})
	}
	arrays := &ValueArrays{}
	for _, tc := range []struct {
		name   string
		fields []value.Field
		row    func(int) []any
		n      int
		sorted bool
	}{
		{"flat", rwFields, rwRow, 2345, false},
		{"flat, in order", rwFields, rwRow, 2345, true},
		{"flat, fewer rows than a batch", rwFields, rwRow, 77, false},
		{"nested", nested, nestedRow, 1500, false},
		{"flat, past the arrays' bound", rwFields, rwRow, 2345, false},
		{"flat, between rows written one by one", rwFields, rwRow, 2345, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Contains(tc.name, "bound") {
				defer func(n int64) { inOrderMaxBytes = n }(inOrderMaxBytes)
				inOrderMaxBytes = 1000
			}
			var order []int32
			if !tc.sorted {
				order = rwPerm(tc.n, 3)
			}
			rowAt := func(j int) []any { // the j-th row written
				if order != nil {
					j = int(order[j])
				}
				return tc.row(j)
			}
			want := rwByRow(t, tc.fields, RowWriterOptions{}, tc.n, rowAt)
			var checked, seen int
			store := objstore.NewMemory()
			w := rwWriter(t, store, "in-order.parquet", tc.fields, RowWriterOptions{
				ValueArrays: arrays,
				Check:       func([]any, int64) error { checked++; return nil },
				Seen:        func([]any) { seen++ },
			})
			if strings.Contains(tc.name, "one by one") {
				const before, after = 50, 60
				for j := range before {
					if err := w.Write(rowAt(j)); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.WriteInOrder(tc.n-before-after, nil, func(i int) ([]any, error) {
					return rowAt(before + i), nil
				}); err != nil {
					t.Fatal(err)
				}
				for j := tc.n - after; j < tc.n; j++ {
					if err := w.Write(rowAt(j)); err != nil {
						t.Fatal(err)
					}
				}
			} else if err := w.WriteInOrder(tc.n, order, func(i int) ([]any, error) { return tc.row(i), nil }); err != nil {
				t.Fatal(err)
			}
			if w.Rows() != int64(tc.n) || checked != tc.n || seen != tc.n {
				t.Fatalf("%d rows, %d checked, %d seen; want %d", w.Rows(), checked, seen, tc.n)
			}
			if got := rwFinish(t, store, "in-order.parquet", w); !bytes.Equal(got, want) {
				t.Fatalf("WriteInOrder wrote %d bytes unlike the %d Write does", len(got), len(want))
			}
		})
	}
}

// TestWriteInOrderReportsTheFirstFailureInRowOrder: rows are converted a
// block and a column at a time; the error is still that of the first row
// (in index order) that fails, whichever column it fails in, and a row
// refused by its caller or by Check stops the conversion there.
func TestWriteInOrderReportsTheFirstFailureInRowOrder(t *testing.T) {
	last := len(rwFields) - 1
	for _, tc := range []struct {
		name    string
		bad     map[int]int // row -> row position given a wrong value
		refuse  int         // row whose callback fails (-1: none)
		check   int         // row Check refuses (-1: none)
		wantErr string
	}{
		{"a later column in an earlier row", map[int]int{100: 1, 7: last}, -1, -1, "row 7:"},
		{"an earlier column in a later row", map[int]int{7: 1, 100: last}, -1, -1, "row 7:"},
		{"a wrong value before a refused row", map[int]int{100: last}, 200, -1, "row 100:"},
		{"a refused row before a wrong value", map[int]int{250: 1}, 200, -1, "bad record"},
		{"a row Check refuses before a wrong value", map[int]int{250: 1}, -1, 200, "checked"},
		{"rows of different blocks", map[int]int{inOrderBlock + 3: 1, 2*inOrderBlock + 1: last}, -1, -1, fmt.Sprintf("row %d:", inOrderBlock+3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := rwWriter(t, objstore.NewMemory(), "f.parquet", rwFields, RowWriterOptions{Check: func(_ []any, n int64) error {
				if n == int64(tc.check) {
					return errors.New("checked")
				}
				return nil
			}})
			defer w.Abort(nil)
			err := w.WriteInOrder(3*inOrderBlock, nil, func(i int) ([]any, error) {
				if i == tc.refuse {
					return nil, errors.New("bad record")
				}
				r := rwRow(i)
				if c, ok := tc.bad[i]; ok {
					r[c] = struct{}{}
				}
				return r, nil
			})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("WriteInOrder = %v, want the error of %q", err, tc.wantErr)
			}
			if err := w.Write(rwRow(0)); err == nil {
				t.Fatal("the file took a row after a failed WriteInOrder")
			}
		})
	}
}

// TestWriteInOrderGivesItsArraysBackCleared writes files through one
// ValueArrays, whole and failing part-way (a row refused while the rows
// are converted, a value of the wrong type): every array it gives back is
// of zero values, so that the pool keeps no file's bytes alive, and the
// next file that takes them writes what a file without them does. The
// arrays are seen as they are given back, not in the pool: a sync.Pool
// keeps one item per P that another P cannot take, and drops items at any
// collection, so what it holds afterwards is not the writer's to promise.
func TestWriteInOrderGivesItsArraysBackCleared(t *testing.T) {
	const n = 3*inOrderBlock + 17
	order := rwPerm(n, 5)
	want := rwByRow(t, rwFields, RowWriterOptions{RowGroupRows: 300}, n, func(j int) []any { return rwRow(int(order[j])) })
	for _, tc := range []struct {
		name    string
		order   []int32
		fail    int // row refused by the callback (-1: none)
		wrong   int // row given a wrong value (-1: none)
		wantErr bool
	}{
		{"written whole, in an order", order, -1, -1, false},
		{"written whole, as they come", nil, -1, -1, false},
		{"a refused row", order, 2*inOrderBlock + 5, -1, true},
		{"a wrong value", order, -1, inOrderBlock + 9, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var held [][]parquet.Value
			arrays := &ValueArrays{given: func(vals []parquet.Value) { held = append(held, vals) }}
			store := objstore.NewMemory()
			w := rwWriter(t, store, "a.parquet", rwFields, RowWriterOptions{ValueArrays: arrays})
			err := w.WriteInOrder(n, tc.order, func(i int) ([]any, error) {
				if i == tc.fail {
					return nil, errors.New("bad record")
				}
				r := rwRow(i)
				if i == tc.wrong {
					r[1] = "not a number"
				}
				return r, nil
			})
			if (err != nil) != tc.wantErr {
				t.Fatalf("WriteInOrder = %v, want an error: %v", err, tc.wantErr)
			}
			if tc.wantErr {
				w.Abort(nil)
			} else {
				rwFinish(t, store, "a.parquet", w)
			}
			arrays.given = nil
			wantHeld := len(rwColumns)
			if tc.order != nil && !tc.wantErr {
				wantHeld++ // the ordering's spare array (the failures come before the ordering)
			}
			if len(held) != wantHeld {
				t.Fatalf("the writer gave back %d arrays, want %d", len(held), wantHeld)
			}
			for k, vals := range held {
				if cap(vals) < n {
					t.Fatalf("array %d has room for %d values, want %d", k, cap(vals), n)
				}
				for i, v := range vals[:cap(vals)] {
					if v != (parquet.Value{}) {
						t.Fatalf("array %d holds %v at %d", k, v, i)
					}
				}
			}
			// The next file takes those the pool kept, and writes what
			// Write does.
			w = rwWriter(t, store, "b.parquet", rwFields, RowWriterOptions{RowGroupRows: 300, ValueArrays: arrays})
			if err := w.WriteInOrder(n, order, func(i int) ([]any, error) { return rwRow(i), nil }); err != nil {
				t.Fatal(err)
			}
			if got := rwFinish(t, store, "b.parquet", w); !bytes.Equal(got, want) {
				t.Fatal("a file written with the arrays given back differs from one written by Write")
			}
			// Dropped, the arrays are no longer lent.
			arrays.Drop()
			if p, ok := arrays.current().Get().(*[]parquet.Value); ok {
				t.Fatalf("after Drop the pool still lends an array of %d values", cap(*p))
			}
		})
	}
}

// TestWriteRowGroupKeptCopiesTheRowsNotDropped copies the row groups of a
// file with every third row dropped, between rows written one by one: the
// file holds the rows written and kept, in order, and each leaf's kept
// values are counted, their nulls, and their extremes taken as asked.
func TestWriteRowGroupKeptCopiesTheRowsNotDropped(t *testing.T) {
	const n = 1000
	src := objstore.NewMemory()
	data := rwByRow(t, rwFields, RowWriterOptions{RowGroupRows: 400}, n, rwRow)
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	leaves := make([]KeptLeaf, len(rwColumns))
	for k, i := range rwColumns {
		typ := rwFields[i].Type
		leaves[k] = KeptLeaf{Bounds: typ != value.Boolean && typ != value.Binary, Float: typ == value.Double}
	}
	w := rwWriter(t, src, "kept.parquet", rwFields, RowWriterOptions{})
	var want [][]any
	for i := range 5 {
		if err := w.Write(rwRow(n + i)); err != nil {
			t.Fatal(err)
		}
		want = append(want, rwRow(n+i))
	}
	row := 0
	for _, rg := range f.RowGroups() {
		dropped := make([]bool, rg.NumRows())
		for j := range dropped {
			dropped[j] = (row+j)%3 == 0
			if !dropped[j] {
				want = append(want, rwRow(row+j))
			}
		}
		got := make([]KeptValues, len(leaves))
		kept, err := w.WriteRowGroupKept(rg, dropped, leaves, func(k int, v *KeptValues) error {
			got[k] = *v
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(len(dropped)) * 2 / 3; kept < want || kept > want+1 {
			t.Fatalf("%d rows kept of %d", kept, len(dropped))
		}
		// k (leaf 0) is the row's number: its extremes are the first
		// and last kept; d (leaf 3) is a NaN-free double, nulls apart.
		lo, hi, ok := got[0].Extremes.Bounds()
		first, last := row, row+len(dropped)-1
		if first%3 == 0 {
			first++
		}
		if last%3 == 0 {
			last--
		}
		if !ok || lo.Int64() != int64(first) || hi.Int64() != int64(last) || got[0].Values != kept || got[0].Nulls != 0 {
			t.Fatalf("leaf k: %+v, bounds %v %v %v; want %d values from %d to %d", got[0], lo, hi, ok, kept, first, last)
		}
		var nulls int64
		for j := range dropped {
			if !dropped[j] && rwRow(row + j)[4] == nil {
				nulls++
			}
		}
		if got[3].Nulls != nulls || got[3].Extremes == nil || got[3].Extremes.NaN() {
			t.Fatalf("leaf d: %+v, want %d nulls", got[3], nulls)
		}
		if got[6].Extremes != nil {
			t.Fatal("extremes taken of a boolean")
		}
		row += len(dropped)
	}
	if err := w.Write(rwRow(n + 5)); err != nil {
		t.Fatal(err)
	}
	want = append(want, rwRow(n+5))
	out := rwFinish(t, src, "kept.parquet", w)
	g, err := parquet.OpenFile(bytes.NewReader(out), int64(len(out)))
	if err != nil {
		t.Fatal(err)
	}
	if g.NumRows() != int64(len(want)) {
		t.Fatalf("%d rows, want %d", g.NumRows(), len(want))
	}
	rows := make([]parquet.Row, len(want))
	r := parquet.NewReader(g)
	if _, err := r.ReadRows(rows); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	for j, wr := range want {
		if got := rows[j][0].Int64(); got != wr[1].(int64) {
			t.Fatalf("row %d has k %d, want %d", j, got, wr[1])
		}
	}
}
