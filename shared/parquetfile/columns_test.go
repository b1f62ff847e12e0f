package parquetfile

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// rwFill fills columns from rows of rwRow, as a caller holding them
// typed would: each column of a primitive type by its typed setter, the
// others (the double) by Set.
func rwFill(row func(int) []any) ColumnFill {
	return func(k, i0 int, c Column) error {
		for j := range c.Len() {
			v := row(i0 + j)[rwColumns[k]]
			if v == nil {
				c.SetNull(j)
				continue
			}
			switch x := v.(type) {
			case int64:
				c.SetInt64(j, x)
			case value.Micros:
				c.SetInt64(j, int64(x))
			case string:
				c.SetString(j, x)
			case []byte:
				c.SetBytes(j, x)
			case bool:
				c.SetBool(j, x)
			default:
				if err := c.Set(j, v); err != nil {
					return fmt.Errorf("row %d: %w", i0+j, err)
				}
			}
		}
		return nil
	}
}

// TestWriteColumnsWritesTheBytesWriteInOrderDoes: the rows of rwRow,
// given column by column (typed setters and Set), make the file their
// rows make through WriteInOrder and through Write: in an order and as
// they come, fewer rows than a batch, several row groups, and between
// rows written one by one.
func TestWriteColumnsWritesTheBytesWriteInOrderDoes(t *testing.T) {
	arrays := &ValueArrays{}
	for _, tc := range []struct {
		name     string
		n        int
		sorted   bool
		oneByOne bool
	}{
		{"in an order", 2345, false, false},
		{"as they come", 2345, true, false},
		{"fewer rows than a batch", 77, false, false},
		{"one block", inOrderBlock, false, false},
		{"between rows written one by one", 2345, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var order []int32
			if !tc.sorted {
				order = rwPerm(tc.n, 7)
			}
			rowAt := func(j int) []any {
				if order != nil {
					j = int(order[j])
				}
				return rwRow(j)
			}
			want := rwByRow(t, rwFields, RowWriterOptions{}, tc.n, rowAt)
			store := objstore.NewMemory()
			w := rwWriter(t, store, "cols.parquet", rwFields, RowWriterOptions{ValueArrays: arrays})
			if !w.CanWriteColumns(tc.n) {
				t.Fatal("a flat file does not take its rows as columns")
			}
			if tc.oneByOne {
				const before, after = 50, 60
				for j := range before {
					if err := w.Write(rowAt(j)); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.WriteColumns(tc.n-before-after, nil, rwFill(func(i int) []any { return rowAt(before + i) })); err != nil {
					t.Fatal(err)
				}
				for j := tc.n - after; j < tc.n; j++ {
					if err := w.Write(rowAt(j)); err != nil {
						t.Fatal(err)
					}
				}
			} else if err := w.WriteColumns(tc.n, order, rwFill(rwRow)); err != nil {
				t.Fatal(err)
			}
			if w.Rows() != int64(tc.n) {
				t.Fatalf("%d rows written, want %d", w.Rows(), tc.n)
			}
			if got := rwFinish(t, store, "cols.parquet", w); !bytes.Equal(got, want) {
				t.Fatalf("WriteColumns wrote %d bytes unlike the %d Write does", len(got), len(want))
			}
		})
	}
}

// TestWriteColumnsRefusesWhatItCannotWrite: a nested schema, or more
// values than the arrays' bound, is not taken (CanWriteColumns says so
// first); a null in a column that is not nullable, a value of another
// kind than its column's and fill's own error fail the write, the first
// in row order reported, and the file takes no more rows.
func TestWriteColumnsRefusesWhatItCannotWrite(t *testing.T) {
	t.Run("nested or too many", func(t *testing.T) {
		nested := append(append([]value.Field(nil), rwFields...), value.Field{Name: "tags", Type: value.ArrayType{Element: value.String}, Nullable: true})
		w := rwWriter(t, objstore.NewMemory(), "n.parquet", nested, RowWriterOptions{})
		defer w.Abort(nil)
		if w.CanWriteColumns(10) {
			t.Fatal("a nested file takes its rows as columns")
		}
		if err := w.WriteColumns(10, nil, rwFill(rwRow)); err == nil {
			t.Fatal("WriteColumns wrote a nested file")
		}
		defer func(n int64) { inOrderMaxBytes = n }(inOrderMaxBytes)
		inOrderMaxBytes = 1000
		f := rwWriter(t, objstore.NewMemory(), "f.parquet", rwFields, RowWriterOptions{})
		defer f.Abort(nil)
		if f.CanWriteColumns(100) || f.WriteColumns(100, nil, rwFill(rwRow)) == nil {
			t.Fatal("WriteColumns took more values than its arrays' bound")
		}
	})
	kCol := 0  // k, a long that is not nullable
	tsCol := 4 // ts, a timestamp that is not nullable
	for _, tc := range []struct {
		name    string
		bad     map[int]int // row -> column k given a wrong value
		kind    bool        // the wrong value is of another kind, not null
		wantErr string
	}{
		{"a null in a later column of an earlier row", map[int]int{100: kCol, 7: tsCol}, false, "row 7: column \"ts\""},
		{"a null in an earlier column of a later row", map[int]int{7: kCol, 100: tsCol}, false, "row 7: column \"k\""},
		{"another kind", map[int]int{inOrderBlock + 3: tsCol, 2*inOrderBlock + 1: kCol}, true, fmt.Sprintf("row %d: column \"ts\"", inOrderBlock+3)},
		{"fill's error", map[int]int{inOrderBlock + 9: -1}, false, fmt.Sprintf("row %d: fill", inOrderBlock+9)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var held [][]parquet.Value
			arrays := &ValueArrays{given: func(vals []parquet.Value) { held = append(held, vals) }}
			w := rwWriter(t, objstore.NewMemory(), "f.parquet", rwFields, RowWriterOptions{ValueArrays: arrays})
			defer w.Abort(nil)
			good := rwFill(rwRow)
			err := w.WriteColumns(3*inOrderBlock, rwPerm(3*inOrderBlock, 1), func(k, i0 int, c Column) error {
				if err := good(k, i0, c); err != nil {
					return err
				}
				for j := range c.Len() {
					if bk, ok := tc.bad[i0+j]; ok {
						switch {
						case bk < 0 && k == 2:
							return fmt.Errorf("row %d: fill", i0+j)
						case bk == k && tc.kind:
							c.SetString(j, "text")
						case bk == k:
							c.SetNull(j)
						}
					}
				}
				return nil
			})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("WriteColumns = %v, want the error of %q", err, tc.wantErr)
			}
			if !strings.Contains(tc.name, "fill") && !errors.Is(err, ErrValueType) {
				t.Fatalf("WriteColumns = %v, want ErrValueType", err)
			}
			if err := w.Write(rwRow(0)); err == nil {
				t.Fatal("the file took a row after a failed WriteColumns")
			}
			for k, vals := range held {
				for i, v := range vals[:cap(vals)] {
					if v != (parquet.Value{}) {
						t.Fatalf("array %d given back holds %v at %d", k, v, i)
					}
				}
			}
			if len(held) != len(rwColumns) {
				t.Fatalf("the writer gave back %d arrays, want %d", len(held), len(rwColumns))
			}
		})
	}
}
