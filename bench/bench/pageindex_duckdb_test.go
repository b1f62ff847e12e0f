package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// TestDuckDBReadsFilesWithSmallPages checks a state file written with the
// state page size and 64-byte key bounds in the column index with a reader
// we did not write: DuckDB sees the many pages, counts every row, and finds
// a key by value.
func TestDuckDBReadsFilesWithSmallPages(t *testing.T) {
	const rows = 50_000
	dir, db := t.TempDir(), openDuckDB(t)
	add := writeFile(t, dir, delta.WriteOptions{
		Schema: value.StructType{Fields: []value.Field{
			{Name: "id", Type: value.String}, {Name: "n", Type: value.Long, Nullable: true}, {Name: cdc.ColOrder, Type: value.Binary, Nullable: true},
		}},
		PageBytes: cdc.StatePageBytes, BloomFilterColumns: []string{"id"},
	}, rows, func(i int) []any {
		return []any{fmt.Sprintf("customer-%040d-%06d", 0, i), int64(i), []byte{byte(i), byte(i >> 8)}}
	})
	path := filepath.Join(dir, add.Path)
	var count, sum int64
	if err := db.QueryRow(`SELECT count(*), sum(n) FROM read_parquet(?)`, path).Scan(&count, &sum); err != nil || count != rows || sum != rows*(rows-1)/2 {
		t.Fatalf("DuckDB counts %d rows summing to %d (%v), want %d and %d", count, sum, err, rows, rows*(rows-1)/2)
	}
	var n int64
	key := fmt.Sprintf("customer-%040d-%06d", 0, 31337)
	if err := db.QueryRow(`SELECT n FROM read_parquet(?) WHERE id = ?`, path, key).Scan(&n); err != nil || n != 31337 {
		t.Fatalf("DuckDB finds n=%d (%v) for %s, want 31337", n, err, key)
	}
	var chunkBytes int64
	if err := db.QueryRow(`SELECT max(total_compressed_size) FROM parquet_metadata(?) WHERE path_in_schema = 'id'`, path).Scan(&chunkBytes); err != nil {
		t.Fatal(err)
	}
	if chunkBytes < 20*cdc.StatePageBytes {
		t.Fatalf("the key column chunk is %d bytes: the test needs many pages", chunkBytes)
	}
}

// TestOnlyValuesOverAFileDuckDBWrote reads a key-sorted file written by
// DuckDB with delta.ReadOptions.OnlyValues: whatever page index DuckDB
// writes (or none), the read returns exactly the rows holding the keys.
func TestOnlyValuesOverAFileDuckDBWrote(t *testing.T) {
	ctx := context.Background()
	dir, db := t.TempDir(), openDuckDB(t)
	const rows = 200_000
	if _, err := db.Exec(fmt.Sprintf(`COPY (SELECT i * 3 AS id, 'v' || i AS v FROM range(%d) t(i) ORDER BY i)
		TO '%s' (FORMAT parquet, ROW_GROUP_SIZE 65536)`, rows, filepath.Join(dir, "duck.parquet"))); err != nil {
		t.Fatal(err)
	}
	store, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	schema := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long, Nullable: true}, {Name: "v", Type: value.String, Nullable: true}}}
	md := delta.Metadata{ID: "duck", Format: delta.Format{Provider: "parquet"}, SchemaString: schema.SchemaString()}
	values := []any{int64(0), int64(3 * 777), int64(3*70_000 + 1), int64(3 * 150_001), int64(3 * (rows - 1))}
	got := map[int64]string{}
	err = delta.ReadFile(ctx, store, md, delta.Add{Path: "duck.parquet"}, delta.ReadOptions{
		Columns: []string{"v", "id"}, RowGroupFilter: &delta.RowGroupFilter{Column: "id", Values: values}, OnlyValues: true,
	}, func(row []any) error {
		got[row[1].(int64)] = row[0].(string)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{0: "v0", 3 * 777: "v777", 3 * 150_001: "v150001", 3 * (rows - 1): fmt.Sprintf("v%d", rows-1)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}

// openDuckDB opens an in-memory DuckDB, closed when the test ends.
func openDuckDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// writeFile writes rows rows (row(i) each) as one data file under dir.
func writeFile(t *testing.T, dir string, opts delta.WriteOptions, rows int, row func(int) []any) delta.Add {
	t.Helper()
	ctx := context.Background()
	store, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := delta.NewFileWriter(ctx, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		if err := w.Write(row(i)); err != nil {
			t.Fatal(err)
		}
	}
	add, err := w.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return add
}
