package parquetfile

import (
	"context"
	"errors"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

// TestAWriterUploadsItsFileOnCommitAndNothingOnAbort: a file written
// column by column, with a bloom filter, is an object of the store once
// committed, which Open checks and reads back; an aborted one leaves no
// object.
func TestAWriterUploadsItsFileOnCommitAndNothingOnAbort(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	s, err := NewSchema([]value.Field{{Name: "k", Type: value.Long}, {Name: "s", Type: value.String, Nullable: true}},
		func(f value.Field) (string, int) { return f.Name, 0 })
	if err != nil {
		t.Fatal(err)
	}
	codec, suffix, err := WriteCodec("snappy")
	if err != nil || suffix != ".snappy" {
		t.Fatalf("snappy: %q, %v", suffix, err)
	}
	opts := WriterOptions{Codec: codec, CreatedBy: "test", Version: "1", PageBytes: 64, LookupColumns: []string{"k"}, BloomFilterColumns: []string{"k"}, BloomFilterBitsPerValue: 10}
	w := NewWriter(ctx, store, "a.parquet", s.Parquet, opts)
	const n = 100
	for i := range n {
		leaves := make([][]parquet.Value, s.Leaves)
		for k, v := range []any{int64(i), "v"} {
			if err := s.Columns[k].Shred(leaves, v, 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		for c, cw := range w.ColumnWriters() {
			if _, err := cw.WriteRowValues(leaves[c]); err != nil {
				t.Fatal(err)
			}
		}
	}
	md, err := w.Finish()
	if err != nil || md.NumRows != n || md.CreatedBy != "test version 1(build )" {
		t.Fatalf("footer %+v, %v", md, err)
	}
	info, err := w.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(ctx, store, "a.parquet", info.Size)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Parquet().NumRows(); got != n {
		t.Fatalf("%d rows, want %d", got, n)
	}
	if cm := f.Parquet().Metadata().RowGroups[0].Columns[0].MetaData; cm.BloomFilterOffset <= 0 {
		t.Fatal("no bloom filter on k")
	}

	w = NewWriter(ctx, store, "b.parquet", s.Parquet, opts)
	w.Abort(errors.New("test"))
	if _, err := store.Stat(ctx, "b.parquet"); err == nil {
		t.Fatal("an aborted file is in the store")
	}
}
