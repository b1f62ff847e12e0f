package delta

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/dsdelta/dsdelta/shared/value"
)

// The statistics a file reads from the footer parquet-go wrote must be
// the ones its rows give, one by one: the same add.stats, byte for byte,
// whatever the types, nulls, row groups and write path.
func TestFooterStatsEqualStatsTakenRowByRow(t *testing.T) {
	schema := value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.String},
		{Name: "b", Type: value.Byte, Nullable: true},
		{Name: "sh", Type: value.Short, Nullable: true},
		{Name: "n", Type: value.Integer, Nullable: true},
		{Name: "l", Type: value.Long, Nullable: true},
		{Name: "s", Type: value.String, Nullable: true},
		{Name: "empty", Type: value.String, Nullable: true}, // "" and null only
		{Name: "never", Type: value.Long, Nullable: true},   // null only
		{Name: "ts", Type: value.Timestamp, Nullable: true},
		{Name: "ntz", Type: value.TimestampNTZ, Nullable: true},
		{Name: "day", Type: value.Date, Nullable: true},
		{Name: "d9", Type: value.DecimalType{Precision: 9, Scale: 3}, Nullable: true},
		{Name: "d18", Type: value.DecimalType{Precision: 18, Scale: 0}, Nullable: true},
		{Name: "d38", Type: value.DecimalType{Precision: 38, Scale: 2}, Nullable: true}, // row by row
		{Name: "x", Type: value.Double, Nullable: true},                                 // row by row
		{Name: "flag", Type: value.Boolean, Nullable: true},
		{Name: "bin", Type: value.Binary, Nullable: true},
		{Name: "st", Type: value.StructType{Fields: []value.Field{{Name: "a", Type: value.Short, Nullable: true}}}, Nullable: true},
		{Name: "part", Type: value.String},
	}}
	for seed := range uint64(12) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			nullShare := []int{0, 2, 4, 50}[seed%4] // 1 in n values null (0: none)
			maybe := func(v any) any {
				if nullShare > 0 && rng.IntN(nullShare) == 0 {
					return nil
				}
				return v
			}
			big := func(x int64) value.Decimal { return value.Decimal{Unscaled: pqBig(x), Scale: 0} }
			rows := make([][]any, 1+rng.IntN(3000))
			if seed == 0 {
				rows = nil // a file of no rows
			}
			for i := range rows {
				var st any
				if rng.IntN(3) > 0 {
					st = []any{maybe(int16(rng.IntN(2000) - 1000))}
				}
				var empty any
				if rng.IntN(2) == 0 {
					empty = ""
				}
				d38 := value.Decimal{Unscaled: pqBig(rng.Int64() - math.MaxInt64/2), Scale: 2}
				if rng.IntN(10) == 0 {
					d38.Unscaled.Lsh(d38.Unscaled, 60) // past 64 bits
				}
				rows[i] = []any{
					fmt.Sprintf("key-%08d-%s", rng.IntN(1e8), strings.Repeat("z", rng.IntN(40))),
					maybe(int8(rng.IntN(256) - 128)), maybe(int16(rng.IntN(65536) - 32768)), maybe(int32(rng.Uint32())), maybe(int64(rng.Uint64())),
					maybe(pqRandString(rng)), empty, nil,
					maybe(value.Micros(rng.Int64N(4e15) - 2e15)), maybe(value.LocalMicros(rng.Int64N(4e15) - 2e15)), maybe(value.Days(rng.Int32N(40000) - 20000)),
					maybe(value.Decimal{Unscaled: pqBig(rng.Int64N(2e9) - 1e9), Scale: 3}), maybe(big(rng.Int64N(2e18) - 1e18)), maybe(d38),
					maybe(rng.NormFloat64()), maybe(rng.IntN(2) == 0), maybe([]byte{byte(rng.IntN(256))}), st, "p",
				}
			}
			opts := WriteOptions{Schema: schema, PartitionColumns: []string{"part"}, PartitionValues: map[string]any{"part": "p"}}
			if seed%3 != 0 {
				opts.RowGroupRows = 1 + rng.Int64N(700) // many row groups
			}
			if seed%4 == 1 {
				// As state files are written: small pages, whose column
				// index bounds parquet-go truncates (the chunk's are whole),
				// and a bloom filter on the key.
				opts.PageBytes, opts.BloomFilterColumns = 8<<10, []string{"id"}
			}
			inOrder := seed%2 == 1
			write := func(fromRows bool) (Add, *FileWriter) {
				ctx := context.Background()
				w, err := NewFileWriter(ctx, newPQMemStore(), opts)
				if err != nil {
					t.Fatal(err)
				}
				if fromRows {
					w.statsFromRows()
				}
				if inOrder {
					order := make([]int32, len(rows))
					for i, j := range rng.Perm(len(rows)) {
						order[i] = int32(j)
					}
					err = w.WriteInOrder(len(rows), order, func(i int) ([]any, error) { return rows[i], nil })
				} else {
					for _, r := range rows {
						if err = w.Write(r); err != nil {
							break
						}
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				add, err := w.Close(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return add, w
			}
			want, _ := write(true)
			got, w := write(false)
			var footer []string
			for _, f := range w.footer {
				footer = append(footer, f.node.key)
			}
			// Every top-level leaf of an order Parquet keeps as Delta's is
			// read from the footer; the others are not.
			if want := "id b sh n l s empty never ts ntz day d9 d18 flag bin"; strings.Join(footer, " ") != want {
				t.Fatalf("columns whose statistics come from the footer: %q, want %q", footer, want)
			}
			if got.Stats != want.Stats {
				t.Errorf("stats from the footer:\n%s\nrow by row:\n%s", got.Stats, want.Stats)
			}
		})
	}
}

// A file that copies a row group (rewrite) takes the copy's summary; after
// rows whose statistics were to come from the footer it cannot, and says
// so rather than write wrong statistics.
func TestARowGroupCopiedAfterFooterStatsRowsIsRefused(t *testing.T) {
	ctx := context.Background()
	schema := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long}}}
	store := newPQMemStore()
	src := pqWrite(t, store, WriteOptions{Schema: schema}, [][]any{{int64(5)}, {int64(9)}})
	b := store.objects[src.Path]
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	rg := f.RowGroups()[0]
	leaves := []leafSummary{{min: int64(5), max: int64(9)}}

	// Copied first: the file's statistics are taken row by row after it.
	w, err := NewFileWriter(ctx, store, WriteOptions{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.writeRowGroup(rg, leaves); err != nil {
		t.Fatal(err)
	}
	if err := w.Write([]any{int64(1)}); err != nil {
		t.Fatal(err)
	}
	add, err := w.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"numRecords":3,"minValues":{"id":1},"maxValues":{"id":9},"nullCount":{"id":0}}`; add.Stats != want {
		t.Errorf("stats = %s, want %s", add.Stats, want)
	}

	// Copied after a row: refused.
	w, err = NewFileWriter(ctx, store, WriteOptions{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.Write([]any{int64(1)}); err != nil {
		t.Fatal(err)
	}
	if err := w.writeRowGroup(rg, leaves); err == nil || !strings.Contains(err.Error(), "statistics come from the footer") {
		t.Fatalf("copy after a row: err = %v, want the refusal", err)
	}
}
