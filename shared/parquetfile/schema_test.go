package parquetfile

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/dsdelta/dsdelta/shared/value"
)

// TestNewSchemaNamesAndNumbersTheLeavesAndShredsValues: the file's columns
// are in the fields' order, named and numbered by Naming (list elements
// unnamed by it), and a row's values shred into leaf values with their
// repetition and definition levels.
func TestNewSchemaNamesAndNumbersTheLeavesAndShredsValues(t *testing.T) {
	fields := []value.Field{
		{Name: "z", Type: value.Long, Nullable: true},
		{Name: "s", Type: value.StructType{Fields: []value.Field{{Name: "x", Type: value.Integer}, {Name: "b", Type: value.String, Nullable: true}}}, Nullable: true},
		{Name: "l", Type: value.ArrayType{Element: value.Long, ContainsNull: true}},
	}
	ids := map[string]int{"z": 1, "s": 2, "x": 3, "b": 4, "l": 5}
	s, err := NewSchema(fields, func(f value.Field) (string, int) { return strings.ToUpper(f.Name), ids[f.Name] })
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, p := range s.Parquet.Columns() {
		paths = append(paths, strings.Join(p, "."))
	}
	if want := []string{"Z", "S.X", "S.B", "L.list.element"}; !slices.Equal(paths, want) || s.Leaves != 4 {
		t.Fatalf("columns %v (%d leaves), want %v", paths, s.Leaves, want)
	}
	for i, f := range s.Parquet.Fields() {
		if f.ID() != []int{1, 2, 5}[i] {
			t.Fatalf("field %s has id %d", f.Name(), f.ID())
		}
	}
	leaves := make([][]parquet.Value, s.Leaves)
	row := []any{nil, []any{int32(7), "q"}, []any{int64(1), nil}}
	for k, n := range s.Columns {
		if err := n.Shred(leaves, row[k], 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	type lv struct{ r, d int }
	got := func(c int) (out []lv) {
		for _, v := range leaves[c] {
			out = append(out, lv{v.RepetitionLevel(), v.DefinitionLevel()})
		}
		return out
	}
	for c, want := range [][]lv{{{0, 0}}, {{0, 1}}, {{0, 2}}, {{0, 2}, {1, 1}}} {
		if !slices.Equal(got(c), want) {
			t.Errorf("leaf %d: levels %v, want %v", c, got(c), want)
		}
	}
	if leaves[1][0].Int32() != 7 || leaves[2][0].String() != "q" || leaves[3][0].Int64() != 1 || !leaves[3][1].IsNull() {
		t.Errorf("values %v", leaves)
	}
	if err := s.Columns[2].Shred(leaves, "no list", 0, 0); !errors.Is(err, ErrValueType) {
		t.Errorf("a string for a list: %v, want ErrValueType", err)
	}
}
