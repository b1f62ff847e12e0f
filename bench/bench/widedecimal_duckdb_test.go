package main

import (
	"math/big"
	"path/filepath"
	"testing"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

// TestDuckDBFiltersAWideDecimalByItsBounds checks the bounds of a decimal
// of more than 18 digits (FIXED_LEN_BYTE_ARRAY) with a reader we did not
// write: in row groups and pages of values of both signs, of one sign and
// of nulls, DuckDB, which skips row groups by their chunk statistics,
// counts the rows a filter on the decimal keeps. Bounds in the order of
// unsigned bytes, as parquet-go wrote them before v0.32.1 (min 1.00 and
// max -5.00 for -5, 3 and 1), would have it skip rows it wants.
func TestDuckDBFiltersAWideDecimalByItsBounds(t *testing.T) {
	const rows = 20_000
	dir, db := t.TempDir(), openDuckDB(t)
	// Blocks of 2000 rows: both signs, negatives, nulls, positives.
	dec := func(i int) any {
		x := int64(i%1000) + 1
		switch i / 2000 % 4 {
		case 0:
			if i%2 == 1 {
				x = -x
			}
		case 1:
			x = -x
		case 2:
			return nil
		}
		return value.Decimal{Unscaled: new(big.Int).Lsh(big.NewInt(x), 64), Scale: 2} // beyond 64 bits
	}
	add := writeFile(t, dir, delta.WriteOptions{
		Schema:    value.StructType{Fields: []value.Field{{Name: "k", Type: value.Long}, {Name: "d", Type: value.DecimalType{Precision: 30, Scale: 2}, Nullable: true}}},
		PageBytes: 1024, RowGroupBytes: 16 << 10,
	}, rows, func(i int) []any { return []any{int64(i), dec(i)} })
	path := filepath.Join(dir, add.Path)
	var groups int
	if err := db.QueryRow(`SELECT count(DISTINCT row_group_id) FROM parquet_metadata(?)`, path).Scan(&groups); err != nil || groups < 8 {
		t.Fatalf("%d row groups (%v): the test needs several", groups, err)
	}
	var neg, pos, nulls, small int64
	for i := range rows {
		d, ok := dec(i).(value.Decimal)
		switch {
		case !ok:
			nulls++
		case d.Unscaled.Sign() < 0:
			neg++
		default:
			pos++
		}
		if ok && d.Unscaled.CmpAbs(new(big.Int).Lsh(big.NewInt(10), 64)) <= 0 {
			small++
		}
	}
	for _, q := range []struct {
		where string
		want  int64
	}{
		{"d < 0", neg},
		{"d > 0", pos},
		{"d IS NULL", nulls},
		{"d BETWEEN -1844674407370955161.60 AND 1844674407370955161.60", small}, // |d| <= 10·2^64 hundredths
	} {
		var n int64
		if err := db.QueryRow(`SELECT count(*) FROM read_parquet(?) WHERE `+q.where, path).Scan(&n); err != nil || n != q.want {
			t.Errorf("DuckDB counts %d rows (%v) WHERE %s, want %d", n, err, q.where, q.want)
		}
	}
}
