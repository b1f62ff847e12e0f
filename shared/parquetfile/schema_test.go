package parquetfile

import (
	"errors"
	"math/big"
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

// TestDecimalsConvertUpToTheirPrecision converts decimals of every
// precision stored as INT32 or INT64 at the edges of their range, of the
// column's scale and of another (rescaled): ±(10^p − 1) is stored as
// itself, ±10^p overflows, and a value of a smaller scale is stored scaled
// up unless that overflows.
func TestDecimalsConvertUpToTheirPrecision(t *testing.T) {
	// stored is the unscaled value a converted decimal of precision p holds.
	stored := func(pv parquet.Value, p int) int64 {
		if p <= 9 {
			return int64(pv.Int32())
		}
		return pv.Int64()
	}
	for p := 1; p <= 18; p++ {
		dt := value.DecimalType{Precision: p, Scale: p / 2}
		_, conv, err := leafNode(dt)
		if err != nil {
			t.Fatal(err)
		}
		lim := DecimalLimit(p)
		top := new(big.Int).Sub(lim, big.NewInt(1))
		for _, u := range []*big.Int{top, new(big.Int).Neg(top), big.NewInt(0), big.NewInt(-7)} {
			pv, err := conv(value.Decimal{Unscaled: u, Scale: dt.Scale})
			if err != nil || stored(pv, p) != u.Int64() {
				t.Fatalf("%v: %v stored as %v (%v)", dt, u, pv, err)
			}
		}
		for _, u := range []*big.Int{lim, new(big.Int).Neg(lim), new(big.Int).Mul(lim, big.NewInt(3))} {
			if _, err := conv(value.Decimal{Unscaled: u, Scale: dt.Scale}); !errors.Is(err, ErrValueType) {
				t.Fatalf("%v: %v converted (%v), want an overflow", dt, u, err)
			}
		}
		if dt.Scale > 0 {
			if pv, err := conv(value.Decimal{Unscaled: big.NewInt(-3), Scale: dt.Scale - 1}); err != nil || stored(pv, p) != -30 {
				t.Fatalf("%v: -3 of scale %d stored as %v (%v), want -30", dt, dt.Scale-1, pv, err)
			}
			if _, err := conv(value.Decimal{Unscaled: top, Scale: dt.Scale - 1}); !errors.Is(err, ErrValueType) {
				t.Fatalf("%v: %v of scale %d converted (%v), want an overflow", dt, top, dt.Scale-1, err)
			}
		}
	}
}
