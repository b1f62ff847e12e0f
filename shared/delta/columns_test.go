package delta

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// TestWriteColumnsWritesWhatWriteInOrderDoes writes the rows of a staged
// part's shape (with a float and a double, whose statistics are taken row
// by row like the wide decimal's) through WriteColumns, given column by
// column, and through WriteInOrder, partitioned and not, in an order and
// as they come: the data files are the same bytes and the add actions
// carry the same statistics and partition values. A file whose schema is
// nested takes the rows from the row callback instead.
func TestWriteColumnsWritesWhatWriteInOrderDoes(t *testing.T) {
	ctx := context.Background()
	day := value.Days(19000)
	floats := []value.Field{{Name: "ratio", Type: value.Float, Nullable: true}, {Name: "score", Type: value.Double, Nullable: true}}
	flat := value.StructType{Fields: append(append([]value.Field{{Name: "day", Type: value.Date}}, flStagedSchema().Fields...), floats...)}
	row := func(i int) []any {
		var ratio, score any = float32(i%97) / 7, math.Inf(1)
		switch i % 5 {
		case 0:
			ratio, score = nil, nil
		case 1:
			score = -float64(i) / 3
		case 2:
			score = math.Copysign(0, -1)
		}
		return append(append([]any{day}, flStagedRow(i)...), ratio, score)
	}
	nested := value.StructType{Fields: append(slices.Clone(flat.Fields), value.Field{Name: "tags", Type: value.ArrayType{Element: value.String}, Nullable: true})}
	nestedRow := func(i int) []any { return append(row(i), []any{"t"}) }
	arrays := &ValueArrays{}
	for _, tc := range []struct {
		name   string
		opts   WriteOptions
		row    func(int) []any
		n      int
		sorted bool
	}{
		{"flat", WriteOptions{Schema: flat, RowGroupRows: 500}, row, 2345, false},
		{"flat, as they come", WriteOptions{Schema: flat, RowGroupRows: 500}, row, 2345, true},
		{"partitioned", WriteOptions{Schema: flat, RowGroupRows: 300, PartitionColumns: []string{"day"}, PartitionValues: map[string]any{"day": day}}, row, 1000, false},
		{"nested", WriteOptions{Schema: nested}, nestedRow, 700, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var order []int32
			if !tc.sorted {
				order = make([]int32, tc.n)
				for i, j := range rand.New(rand.NewPCG(uint64(tc.n), 9)).Perm(tc.n) {
					order[i] = int32(j)
				}
			}
			write := func(name string, columns bool) (Add, []byte) {
				opts := tc.opts
				opts.FileName, opts.ValueArrays = name, arrays
				store := newPQMemStore()
				w, err := NewFileWriter(ctx, store, opts)
				if err != nil {
					t.Fatal(err)
				}
				rowOf := func(i int) ([]any, error) { return tc.row(i), nil }
				if columns {
					filled := 0
					err = w.WriteColumns(tc.n, order, Columns{
						Fill: func(f, i0 int, c Column) error {
							filled += c.Len()
							for j := range c.Len() {
								if err := c.Set(j, tc.row(i0 + j)[f]); err != nil {
									return err
								}
							}
							return nil
						},
						Value: func(f, i int) any { return tc.row(i)[f] },
					}, rowOf)
					if want := tc.n * len(w.dataIdx); err == nil && value.Equal(tc.opts.Schema, flat) && filled != want {
						t.Fatalf("Fill set %d values, want %d", filled, want)
					}
				} else {
					err = w.WriteInOrder(tc.n, order, rowOf)
				}
				if err != nil {
					t.Fatal(err)
				}
				add, err := w.Close(ctx)
				if err != nil {
					t.Fatal(err)
				}
				obj, err := add.ObjectName()
				if err != nil {
					t.Fatal(err)
				}
				data, err := objstore.ReadAll(ctx, store, obj)
				if err != nil {
					t.Fatal(err)
				}
				return add, data
			}
			wantAdd, want := write("f.parquet", false)
			gotAdd, got := write("f.parquet", true)
			if !bytes.Equal(got, want) {
				t.Fatalf("WriteColumns wrote %d bytes unlike the %d WriteInOrder does", len(got), len(want))
			}
			if gotAdd.Stats != wantAdd.Stats || gotAdd.Path != wantAdd.Path {
				t.Fatalf("add %s %s, want %s %s", gotAdd.Path, gotAdd.Stats, wantAdd.Path, wantAdd.Stats)
			}
		})
	}
	t.Run("another partition value", func(t *testing.T) {
		w, err := NewFileWriter(ctx, newPQMemStore(), WriteOptions{Schema: flat, PartitionColumns: []string{"day"}, PartitionValues: map[string]any{"day": day}})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Abort()
		err = w.WriteColumns(100, nil, Columns{
			Fill: func(f, i0 int, c Column) error { return nil },
			Value: func(f, i int) any {
				if i == 42 {
					return day + 1
				}
				return row(i)[f]
			},
		}, nil)
		if !errors.Is(err, ErrPartitionValue) {
			t.Fatalf("WriteColumns = %v, want %v", err, ErrPartitionValue)
		}
		if err := w.Write(row(0)); err == nil {
			t.Fatal("the file took a row after a failed WriteColumns")
		}
	})
}
