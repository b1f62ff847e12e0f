package delta

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/google/uuid"
)

// countingStore counts the bytes read from a store.
type countingStore struct {
	objstore.Store
	read atomic.Int64
}

func (s *countingStore) NewReader(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	rc, err := s.Store.NewReader(ctx, name, off, n)
	if err == nil && n > 0 {
		s.read.Add(n)
	}
	return rc, err
}

// blLookupSchema is a narrow state table: the key, a few source columns and
// the merge's order column.
func blLookupSchema() value.StructType {
	return value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.String}, {Name: "name", Type: value.String, Nullable: true},
		{Name: "amount", Type: value.Long, Nullable: true}, {Name: "updated", Type: value.Timestamp, Nullable: true},
		{Name: "_order", Type: value.Binary, Nullable: true},
	}}
}

// blTable writes rows random-UUID rows as one data file of row groups of
// rgRows rows, with a bloom filter of bits per value on id (none when
// bits is 0), in key order when ordered (as the merge writes state files),
// and returns the file and every key written.
func blTable(b *testing.B, store objstore.Store, rows int, rgRows int64, bits uint, ordered bool) (Metadata, Add, []string) {
	b.Helper()
	r := rand.New(rand.NewPCG(14, 3))
	keys := make([]string, rows)
	for i := range keys {
		keys[i] = blUUID(r)
	}
	if ordered {
		slices.Sort(keys)
	}
	opts := WriteOptions{Schema: blLookupSchema(), RowGroupRows: rgRows}
	if bits > 0 {
		opts.BloomFilterColumns, opts.BloomFilterBitsPerValue = []string{"id"}, bits
	}
	w, err := NewFileWriter(context.Background(), store, opts)
	if err != nil {
		b.Fatal(err)
	}
	order := make([]byte, 16)
	for i := range rows {
		for j := range order {
			order[j] = byte(r.Uint32())
		}
		if err := w.Write([]any{keys[i], fmt.Sprintf("customer %08d", i), r.Int64N(1e9), value.Micros(1.7e15 + r.Int64N(1e12)), order}); err != nil {
			b.Fatal(err)
		}
	}
	add, err := w.Close(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	s := blLookupSchema()
	return Metadata{ID: "lookup", Format: Format{Provider: "parquet"}, SchemaString: s.SchemaString()}, add, keys
}

func blUUID(r *rand.Rand) string {
	var id uuid.UUID
	for j := range id {
		id[j] = byte(r.Uint32())
	}
	return id.String()
}

// BenchmarkBloomLookup looks up 10k random UUID keys, 100 of which exist,
// in a 1M-row state table, reading the key and order columns as the
// merge's lookup does (first-key bounds, then the bloom filter), with and
// without bloom filters, for several row group sizes, in a file written in
// key order (as the merge writes state files) and in random order. It
// reports the row groups decoded, the bytes fetched and the file-size
// overhead of the filters.
func BenchmarkBloomLookup(b *testing.B) {
	const rows, probes, hits = 1_000_000, 10_000, 100
	for _, ordered := range []bool{true, false} {
		for _, rgRows := range []int64{DefaultRowGroupRows, 8192, 1024} {
			blLookup(b, rows, probes, hits, rgRows, ordered)
		}
	}
}

func blLookup(b *testing.B, rows, probes, hits int, rgRows int64, ordered bool) {
	layout := "key-ordered"
	if !ordered {
		layout = "random-order"
	}
	var plainSize int64
	for _, bits := range []uint{0, 10, 32} {
		b.Run(fmt.Sprintf("%s/rowgroup=%d/bits=%d", layout, rgRows, bits), func(b *testing.B) {
			mem := objstore.NewMemory()
			start := time.Now()
			md, add, keys := blTable(b, mem, rows, rgRows, bits, ordered)
			writeTime := time.Since(start)
			if bits == 0 {
				plainSize = add.Size
			}
			r := rand.New(rand.NewPCG(7, 7))
			want := make([]any, 0, probes)
			for range hits {
				want = append(want, keys[r.IntN(len(keys))])
			}
			for len(want) < probes {
				want = append(want, blUUID(r))
			}
			sort.Slice(want, func(i, j int) bool { return value.Compare(want[i], want[j]) < 0 })
			wanted := map[string]bool{}
			for _, k := range want {
				wanted[k.(string)] = true
			}
			flt := &RowGroupFilter{Column: "id", Values: want, Keep: func(lo, hi any) bool {
				i := sort.Search(len(want), func(i int) bool { return value.Compare(want[i], lo) >= 0 })
				return i < len(want) && value.Compare(want[i], hi) <= 0
			}}
			store := &countingStore{Store: mem}
			var decoded, found int
			b.ResetTimer()
			for b.Loop() {
				store.read.Store(0)
				decoded, found = 0, 0
				err := ReadFile(context.Background(), store, md, add, ReadOptions{Columns: []string{"id", "_order"}, RowGroupFilter: flt}, func(row []any) error {
					decoded++
					if wanted[row[0].(string)] {
						found++
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if found < hits-1 { // two draws of the same key count once
				b.Fatalf("found %d of the %d keys present", found, hits)
			}
			groups := (rows + int(rgRows) - 1) / int(rgRows)
			b.ReportMetric(float64(decoded)/float64(rgRows), "rowgroups-decoded")
			b.ReportMetric(float64(groups), "rowgroups")
			b.ReportMetric(float64(store.read.Load())/(1<<20), "MiB-fetched")
			b.ReportMetric(float64(add.Size)/(1<<20), "file-MiB")
			b.ReportMetric(writeTime.Seconds(), "write-s")
			if bits > 0 && plainSize > 0 {
				b.ReportMetric(100*float64(add.Size-plainSize)/float64(plainSize), "size-overhead-%")
			}
		})
	}
}

// BenchmarkBloomWrite writes 200k rows of the lookup's state table in key
// order, with and without a bloom filter on the key column: the filter's
// cost on the merge's write path.
func BenchmarkBloomWrite(b *testing.B) {
	for _, bits := range []uint{0, 32} {
		b.Run(fmt.Sprintf("bits=%d", bits), func(b *testing.B) {
			for b.Loop() {
				blTable(b, objstore.NewMemory(), 200_000, DefaultRowGroupRows, bits, true)
			}
			b.ReportMetric(float64(200_000*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
