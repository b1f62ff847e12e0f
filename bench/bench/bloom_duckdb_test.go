package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// TestDuckDBReadsTheBloomFiltersDsdeltaWrites checks the split-block bloom
// filters of a data file with a reader we did not write: DuckDB finds them
// in the footer, probes them with its own hashing, and never excludes a
// row group holding the value.
func TestDuckDBReadsTheBloomFiltersDsdeltaWrites(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	schema := value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.String}, {Name: "n", Type: value.Long}, {Name: "k", Type: value.Integer, Nullable: true},
	}}
	const rows, rgRows = 4096, 1024
	w, err := delta.NewFileWriter(ctx, store, delta.WriteOptions{Schema: schema, RowGroupRows: rgRows, BloomFilterColumns: []string{"id", "n", "k"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		if err := w.Write([]any{fmt.Sprintf("key-%06d", i), int64(i) * 7919, int32(i)}); err != nil {
			t.Fatal(err)
		}
	}
	add, err := w.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, add.Path)
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	var withFilter int
	if err := db.QueryRow(`SELECT count(*) FROM parquet_metadata(?) WHERE bloom_filter_offset IS NOT NULL AND bloom_filter_length > 0`, path).Scan(&withFilter); err != nil {
		t.Fatal(err)
	}
	if want := 3 * rows / rgRows; withFilter != want {
		t.Errorf("DuckDB sees %d column chunks with a bloom filter, want %d", withFilter, want)
	}
	var count int
	if err := db.QueryRow(`SELECT count(*) FROM read_parquet(?)`, path).Scan(&count); err != nil || count != rows {
		t.Fatalf("DuckDB counts %d rows (%v), want %d", count, err, rows)
	}
	for _, tc := range []struct {
		col   string
		value any
		group int // row group holding it, -1 for none
	}{
		{"id", "key-002500", 2500 / rgRows},
		{"n", int64(3000) * 7919, 3000 / rgRows},
		{"k", int32(17), 0},
		{"id", "no such key", -1},
		{"n", int64(-1), -1},
	} {
		t.Run(fmt.Sprintf("DuckDB probes %s=%v", tc.col, tc.value), func(t *testing.T) {
			q, err := db.Query(`SELECT row_group_id, bloom_filter_excludes FROM parquet_bloom_probe(?, ?, ?) ORDER BY row_group_id`, path, tc.col, tc.value)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			excluded := 0
			for q.Next() {
				var g int
				var excludes bool
				if err := q.Scan(&g, &excludes); err != nil {
					t.Fatal(err)
				}
				if g == tc.group && excludes {
					t.Errorf("DuckDB's probe excludes row group %d, which holds the value", g)
				}
				if excludes {
					excluded++
				}
			}
			if err := q.Err(); err != nil {
				t.Fatal(err)
			}
			// DuckDB reports exclusion only where it read a filter: the
			// other row groups must be excluded (32 bits per value).
			if want := rows / rgRows; tc.group >= 0 {
				want--
				if excluded != want {
					t.Errorf("DuckDB excludes %d row groups, want the %d without the value", excluded, want)
				}
			} else if excluded != want {
				t.Errorf("DuckDB excludes %d row groups, want all %d", excluded, want)
			}
		})
	}
}

// TestDsdeltaReadsTheBloomFiltersDuckDBWrites probes the bloom filters of a
// file DuckDB wrote (it writes them for dictionary-encoded chunks) with
// dsdelta's row-group filter: the row group holding a value is read, the
// others are skipped.
func TestDsdeltaReadsTheBloomFiltersDuckDBWrites(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const groups, rgRows = 4, 2048
	// 50 distinct values per row group: DuckDB dictionary-encodes them.
	if _, err := db.Exec(fmt.Sprintf(`COPY (SELECT 'key-' || (i // %d) || '-' || (i %% 50) AS id, (i // %d) * 1000 + i %% 50 AS n FROM range(%d) t(i))
		TO '%s' (FORMAT parquet, ROW_GROUP_SIZE %d)`, rgRows, rgRows, groups*rgRows, filepath.Join(dir, "duck.parquet"), rgRows)); err != nil {
		t.Fatal(err)
	}
	var withFilter int
	if err := db.QueryRow(`SELECT count(*) FROM parquet_metadata(?) WHERE bloom_filter_offset IS NOT NULL`, filepath.Join(dir, "duck.parquet")).Scan(&withFilter); err != nil {
		t.Fatal(err)
	}
	if withFilter != 2*groups {
		t.Fatalf("DuckDB wrote %d column chunks with a bloom filter, want %d: the test proves nothing", withFilter, 2*groups)
	}
	store, err := objstore.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	schema := value.StructType{Fields: []value.Field{{Name: "id", Type: value.String, Nullable: true}, {Name: "n", Type: value.Long, Nullable: true}}}
	md := delta.Metadata{ID: "duck", Format: delta.Format{Provider: "parquet"}, SchemaString: schema.SchemaString()}
	add := delta.Add{Path: "duck.parquet"}
	for _, tc := range []struct {
		col    string
		values []any
		group  int
	}{
		{"id", []any{"key-2-17"}, 2},
		{"n", []any{int64(3049)}, 3},
		{"id", []any{"key-9-1", "absent"}, -1},
	} {
		t.Run(fmt.Sprintf("%s in %v", tc.col, tc.values), func(t *testing.T) {
			read := map[int]bool{}
			err := delta.ReadFile(ctx, store, md, add, delta.ReadOptions{Columns: []string{"n"}, RowGroupFilter: &delta.RowGroupFilter{Column: tc.col, Values: tc.values}}, func(row []any) error {
				read[int(row[0].(int64)/1000)] = true
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if tc.group >= 0 && !read[tc.group] {
				t.Errorf("row group %d holds the value and was skipped", tc.group)
			}
			if want := min(tc.group+1, 1); len(read) > want {
				t.Errorf("read row groups %v, want only the one holding the value (if any)", read)
			}
		})
	}
}
