package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/parquetfile"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
)

// flStagedColumns are the columns of a file shaped like a staged part of
// the merge (the history metadata columns, then the source columns, every
// one flat), with the value each has in row i: runs of repeated strings
// where a part has them (operation, read method, source file), distinct
// ones elsewhere, and a null every few rows in the nullable source
// columns.
var flStagedColumns = []struct {
	name     string
	typ      value.Type
	nullEach int // a null every nullEach rows; 0 for a required column
	at       func(i int) any
}{
	{"_ds_source_date", value.Date, 0, func(i int) any { return value.Days(20000 + i/50_000) }},
	{"_ds_op", value.String, 0, func(i int) any { return flOps[(i/700)%len(flOps)] }},
	{"_ds_change_type", value.String, 5, func(i int) any { return flOps[(i/900)%len(flOps)] }},
	{"_ds_source_timestamp", value.Timestamp, 0, func(i int) any { return flMicros(i) }},
	{"_ds_read_timestamp", value.Timestamp, 1 << 30, func(i int) any { return flMicros(i) + 5_000_000 }},
	{"_ds_read_method", value.String, 1 << 30, func(int) any { return "mysql-cdc-binlog" }},
	{"_ds_position", value.String, 0, func(i int) any { return fmt.Sprintf("mysql-bin.000123:%012d", i) }},
	{"_ds_order", value.Binary, 0, func(i int) any { return []byte{0, 0, 0, 0, 0, byte(i >> 16), byte(i >> 8), byte(i)} }},
	{"_ds_uuid", value.String, 3, func(i int) any { return fmt.Sprintf("5c1f0e2a-9b7d-4f7e-8a41-%012x", i) }},
	{"_ds_is_deleted", value.Boolean, 1 << 30, func(i int) any { return i%11 == 0 }},
	{"_ds_source_file", value.String, 1 << 30, func(i int) any {
		return fmt.Sprintf("gs://bucket/stream/2026/01/%02d/file-%04d.jsonl", i/40_000, i/5_000)
	}},
	{"_ds_source_generation", value.Long, 1 << 30, func(i int) any { return int64(1_700_000_000 + i/5_000) }},
	{"_ds_record", value.Long, 1 << 30, func(i int) any { return int64(i % 5_000) }},
	{"id", value.Long, 17, func(i int) any { return int64(i * 7) }},
	{"customer", value.String, 13, func(i int) any { return fmt.Sprintf("customer %d", i%5000) }},
	{"email", value.String, 7, func(i int) any { return fmt.Sprintf("user%d@example.com", i) }},
	{"amount", value.DecimalType{Precision: 18, Scale: 2}, 9, func(i int) any {
		return value.Decimal{Unscaled: big.NewInt(int64(i*37) % 1_000_000), Scale: 2}
	}},
	{"balance", value.DecimalType{Precision: 38, Scale: 10}, 19, func(i int) any {
		return value.Decimal{Unscaled: big.NewInt(int64(i) * 123_456_789), Scale: 10}
	}},
	{"created_at", value.Timestamp, 4, func(i int) any { return flMicros(i) - 86_400_000_000 }},
	{"birthday", value.Date, 6, func(i int) any { return value.Days(7000 + i%9000) }},
}

var flOps = []string{"INSERT", "UPDATE-INSERT", "UPDATE-DELETE", "DELETE"}

func flMicros(i int) value.Micros { return value.Micros(1_700_000_000_000_000 + int64(i)*1000) }

func flStagedSchema() value.StructType {
	var s value.StructType
	for _, c := range flStagedColumns {
		s.Fields = append(s.Fields, value.Field{Name: c.name, Type: c.typ, Nullable: c.nullEach > 0})
	}
	return s
}

func flStagedRow(i int) []any {
	row := make([]any, len(flStagedColumns))
	for k, c := range flStagedColumns {
		if c.nullEach == 0 || i%c.nullEach != 0 {
			row[k] = c.at(i)
		}
	}
	return row
}

// pqWriteRows writes rows rows (row(i) for each) into one data file of
// store.
func pqWriteRows(tb testing.TB, store objstore.Store, opts WriteOptions, rows int, row func(int) []any) Add {
	tb.Helper()
	ctx := context.Background()
	w, err := NewFileWriter(ctx, store, opts)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range rows {
		if err := w.Write(row(i)); err != nil {
			tb.Fatal(err)
		}
	}
	add, err := w.Close(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return add
}

// BenchmarkReadFileFlat reads a file shaped like a staged part of the
// merge (20 flat columns, row groups of 2048 rows) whole, as the merge
// does (KeepRows) and as a plain read does, through the flat read and
// through the generic record assembly.
func BenchmarkReadFileFlat(b *testing.B) {
	store := newPQMemStore()
	ctx := context.Background()
	add := pqWriteRows(b, store, WriteOptions{Schema: flStagedSchema(), RowGroupRows: 2048}, pqBenchRows, flStagedRow)
	md := pqMetadata(flStagedSchema(), nil, nil)
	for _, tc := range []struct {
		name string
		opts ReadOptions
	}{
		{"flat", ReadOptions{}},
		{"flat keep rows", ReadOptions{KeepRows: true}},
		// The baseline, in the same run: the generic record assembly.
		{"assembled", ReadOptions{assemble: true}},
		{"assembled keep rows", ReadOptions{KeepRows: true, assemble: true}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				err := ReadFile(ctx, store, md, add, tc.opts, func([]any) error { n++; return nil })
				if err != nil || n != pqBenchRows {
					b.Fatalf("read %d rows: %v", n, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/pqBenchRows, "ns/row")
		})
	}
}

// flKinds are the flat column types the random files draw from.
var flKinds = []value.Type{
	value.Byte, value.Short, value.Integer, value.Long, value.Float, value.Double, value.Boolean,
	value.String, value.Binary, value.Date, value.Timestamp, value.TimestampNTZ,
	value.DecimalType{Precision: 5, Scale: 2}, value.DecimalType{Precision: 12, Scale: 0},
	value.DecimalType{Precision: 18, Scale: 6}, value.DecimalType{Precision: 25, Scale: 3},
	value.DecimalType{Precision: 38, Scale: 10},
}

// flRandValue returns a random non-null value of flat type t; strings
// repeat in runs (i/run), as a change's operation does.
func flRandValue(rng *rand.Rand, t value.Type, i int) any {
	switch t {
	case value.Byte:
		return int8(rng.IntN(256) - 128)
	case value.Short:
		return int16(rng.IntN(65536) - 32768)
	case value.Integer:
		return rng.Int32() - rng.Int32()
	case value.Long:
		return rng.Int64() - rng.Int64()
	case value.Float:
		return float32(rng.NormFloat64())
	case value.Double:
		return rng.NormFloat64() * 1e6
	case value.Boolean:
		return rng.IntN(2) == 0
	case value.String:
		if rng.IntN(3) == 0 {
			return fmt.Sprintf("run %d", i/7)
		}
		return pqRandString(rng)
	case value.Binary:
		b := make([]byte, rng.IntN(12))
		for j := range b {
			b[j] = byte(rng.IntN(256))
		}
		return b
	case value.Date:
		return value.Days(rng.IntN(40000) - 20000)
	case value.Timestamp:
		return value.Micros(rng.Int64N(4e15) - 2e15)
	case value.TimestampNTZ:
		return value.LocalMicros(rng.Int64N(4e15) - 2e15)
	}
	dt := t.(value.DecimalType)
	limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(dt.Precision)), nil)
	raw := make([]byte, 17)
	for j := range raw {
		raw[j] = byte(rng.IntN(256))
	}
	u := new(big.Int).Mod(new(big.Int).SetBytes(raw), limit)
	if rng.IntN(4) == 0 {
		u.SetInt64(rng.Int64N(1000)) // small values too
	}
	if rng.IntN(2) == 0 {
		u.Neg(u)
	}
	return value.Decimal{Unscaled: u, Scale: dt.Scale}
}

// flRandFile writes a random flat file: columns of random kinds, some
// required, nulls in the others (in some all), in random row groups and
// pages. The first column is a non-null long id, ascending.
func flRandFile(t *testing.T, rng *rand.Rand, store *pqMemStore) (value.StructType, Add, [][]any) {
	t.Helper()
	schema := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long}}}
	for c := range 4 + rng.IntN(16) {
		nullable := rng.IntN(4) != 0
		schema.Fields = append(schema.Fields, value.Field{Name: fmt.Sprintf("c%d", c), Type: flKinds[rng.IntN(len(flKinds))], Nullable: nullable})
	}
	n := 1 + rng.IntN(3000)
	nulls := make([]int, len(schema.Fields)) // a null every nulls[c] rows
	for c, f := range schema.Fields {
		if f.Nullable {
			nulls[c] = []int{1, 2, 5, 50, n + 1}[rng.IntN(5)]
		}
	}
	rows := make([][]any, n)
	for i := range rows {
		r := make([]any, len(schema.Fields))
		r[0] = int64(i * 3)
		for c := 1; c < len(r); c++ {
			if nulls[c] > 0 && rng.IntN(nulls[c]) == 0 {
				continue
			}
			r[c] = flRandValue(rng, schema.Fields[c].Type, i)
		}
		rows[i] = r
	}
	opts := WriteOptions{Schema: schema, RowGroupRows: int64(1 + rng.IntN(2*n)), Compression: CompressionSnappy}
	if rng.IntN(2) == 0 {
		opts.PageBytes = 256 + rng.IntN(4096) // many pages, cut across batches
	}
	return schema, pqWrite(t, store, opts, rows), rows
}

// flRead reads add with opts, through the flat read or (assemble) the
// generic record assembly: the rows with their positions, and the error.
func flRead(store objstore.Store, md Metadata, add Add, opts ReadOptions, assemble bool) ([]int64, [][]any, error) {
	opts.assemble = assemble
	var pos []int64
	var rows [][]any
	err := ReadFileAt(context.Background(), store, md, add, opts, func(p int64, row []any) error {
		pos = append(pos, p)
		rows = append(rows, row)
		return nil
	})
	return pos, rows, err
}

// flSame fails t unless the flat read and the generic assembly return the
// same rows, positions and error for add read with opts; it returns the
// rows.
func flSame(t *testing.T, store *pqMemStore, md Metadata, add Add, opts ReadOptions) [][]any {
	t.Helper()
	wantPos, want, wantErr := flRead(store, md, add, opts, true)
	gotPos, got, gotErr := flRead(store, md, add, opts, false)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("flat read: err = %v, assembled: %v", gotErr, wantErr)
	}
	if !slices.Equal(gotPos, wantPos) || len(got) != len(want) {
		t.Fatalf("flat read returned %d rows at %v, assembled %d at %v", len(got), gotPos, len(want), wantPos)
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("row %d: flat read has %d columns, assembled %d", i, len(got[i]), len(want[i]))
		}
		for c := range want[i] {
			if err := sameValue(got[i][c], want[i][c]); err != nil {
				t.Fatalf("row %d (position %d), column %d: %v", i, gotPos[i], c, err)
			}
		}
	}
	return got
}

// flRowsEqual fails t unless got holds the rows want, in order.
func flRowsEqual(t *testing.T, got, want [][]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if !pqEqual(got[i], want[i]) {
			t.Fatalf("row %d:\n got %#v\nwant %#v", i, got[i], want[i])
		}
	}
}

func TestFlatReadReturnsWhatTheAssemblyDoes(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprintf("random flat file %d reads the same", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			store := newPQMemStore()
			schema, add, rows := flRandFile(t, rng, store)
			md := pqMetadata(schema, nil, nil)
			flRowsEqual(t, flSame(t, store, md, add, ReadOptions{}), rows)
			flRowsEqual(t, flSame(t, store, md, add, ReadOptions{KeepRows: true}), rows)

			// Projected: columns reordered, some twice, one the file lacks.
			wider := schema
			wider.Fields = append(slices.Clone(schema.Fields), value.Field{Name: "later", Type: value.String, Nullable: true})
			var cols []string
			for _, f := range wider.Fields {
				if rng.IntN(2) == 0 {
					cols = append(cols, f.Name)
				}
			}
			rng.Shuffle(len(cols), func(i, j int) { cols[i], cols[j] = cols[j], cols[i] })
			cols = append(cols, "later")
			flSame(t, store, pqMetadata(wider, nil, nil), add, ReadOptions{Columns: cols, KeepRows: rng.IntN(2) == 0})
			flSame(t, store, md, add, ReadOptions{Columns: []string{"id", "id"}})

			// Row groups filtered by the id bounds, and by looking ids up
			// (through the page index where a group has one).
			lo := int64(rng.IntN(len(rows)) * 3)
			filter := &RowGroupFilter{Column: "id", Keep: func(min, max any) bool { return max.(int64) >= lo && min.(int64) <= lo+300 }}
			flSame(t, store, md, add, ReadOptions{RowGroupFilter: filter})
			ids := []any{lo, lo + 3, lo + 1, int64(len(rows)*3 - 3)}
			flSame(t, store, md, add, ReadOptions{Columns: []string{"c0", "id"}, RowGroupFilter: &RowGroupFilter{Column: "id", Values: ids}, OnlyValues: true})

			// Rows deleted by a vector.
			var del []uint64
			for i := range rows {
				if rng.IntN(3) == 0 {
					del = append(del, uint64(i))
				}
			}
			dvAdd := add
			dvAdd.DeletionVector = pqInlineDV(t, del)
			flSame(t, store, md, dvAdd, ReadOptions{KeepRows: true})
		})
	}
}

func TestFlatReadReadsPartitionColumnsAsTheAssemblyDoes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	schema := value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.Long}, {Name: "dt", Type: value.Date, Nullable: true}, {Name: "s", Type: value.String, Nullable: true},
	}}
	rows := make([][]any, 600)
	for i := range rows {
		rows[i] = []any{int64(i), value.Days(19000), flRandValue(rng, value.String, i)}
	}
	store := newPQMemStore()
	add := pqWrite(t, store, WriteOptions{Schema: schema, PartitionColumns: []string{"dt"}, PartitionValues: map[string]any{"dt": value.Days(19000)}, RowGroupRows: 100}, rows)
	md := pqMetadata(schema, []string{"dt"}, nil)
	flRowsEqual(t, flSame(t, store, md, add, ReadOptions{KeepRows: true}), rows)
}

func TestFlatReadStopsWhereTheCallbackFails(t *testing.T) {
	store := newPQMemStore()
	rows := make([][]any, 1000)
	for i := range rows {
		rows[i] = []any{int64(i), fmt.Sprint(i)}
	}
	schema := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long}, {Name: "s", Type: value.String, Nullable: true}}}
	add := pqWrite(t, store, WriteOptions{Schema: schema, RowGroupRows: 400}, rows)
	stop := errors.New("stop")
	for _, assemble := range []bool{false, true} {
		n := 0
		err := ReadFile(context.Background(), store, pqMetadata(schema, nil, nil), add, ReadOptions{assemble: assemble}, func(row []any) error {
			if n++; n == 555 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || n != 555 {
			t.Errorf("assemble %v: stopped after %d rows with %v, want 555 and the callback's error", assemble, n, err)
		}
	}
}

func TestFlatReadOfFixtureTablesReturnsWhatTheAssemblyDoes(t *testing.T) {
	for _, table := range []string{
		"snapshot-data0", "data-reader-primitives", "data-reader-partition-values", "data-reader-date-types-UTC",
		"decimal-various-scale-precision", "kernel-timestamp-TIMESTAMP_MICROS", "data-skipping-basic-stats-all-types",
		"table-with-dv-small", "basic-dv-no-checkpoint", "table-with-columnmapping-mode-name", "data-reader-map",
		"data-reader-nested-struct", "basic-with-inserts-updates",
	} {
		t.Run(table+" reads the same both ways", func(t *testing.T) {
			s := pqFixtureStore(t, table)
			md, adds := pqReplay(t, s, -1)
			schema, err := value.ParseSchema(md.SchemaString)
			if err != nil {
				t.Fatal(err)
			}
			// The primitive columns alone are read flat even where the
			// table also has nested ones.
			var prim []string
			for _, f := range schema.Fields {
				switch f.Type.(type) {
				case value.StructType, value.ArrayType, value.MapType:
				default:
					prim = append(prim, f.Name)
				}
			}
			if len(adds) == 0 || len(prim) == 0 {
				t.Fatalf("fixture has %d files, %d primitive columns", len(adds), len(prim))
			}
			for _, a := range adds {
				flSame(t, s, md, a, ReadOptions{})
				flSame(t, s, md, a, ReadOptions{Columns: prim, KeepRows: true})
			}
		})
	}
}

func TestFlatReadDecodesOtherWritersEncodingsAsTheAssemblyDoes(t *testing.T) {
	field := func(name string, n parquet.Node) parquet.Field { return parquetfile.NamedField(name, n) }
	dict := func(n parquet.Node) parquet.Node { return parquet.Encoded(n, &parquet.RLEDictionary) }
	root := parquetfile.NewGroup(
		field("id", parquet.Required(parquet.Leaf(parquet.Int64Type))),
		field("d_long", parquet.Optional(dict(parquet.Leaf(parquet.Int64Type)))),
		field("d_str", parquet.Optional(dict(parquet.String()))),
		field("d_req_str", parquet.Required(dict(parquet.String()))),
		field("d_ts", parquet.Optional(dict(parquet.Timestamp(parquet.Millisecond)))),
		field("d_dec", parquet.Optional(dict(parquet.Decimal(2, 20, parquet.FixedLenByteArrayType(9))))),
		field("delta_int", parquet.Optional(parquet.Encoded(parquet.Int(32), &parquet.DeltaBinaryPacked))),
		field("delta_str", parquet.Optional(parquet.Encoded(parquet.String(), &parquet.DeltaLengthByteArray))),
		field("delta_bin", parquet.Optional(parquet.Encoded(parquet.Leaf(parquet.ByteArrayType), &parquet.DeltaByteArray))),
		field("split", parquet.Optional(parquet.Encoded(parquet.Leaf(parquet.DoubleType), &parquet.ByteStreamSplit))),
		field("flag", parquet.Optional(parquet.Leaf(parquet.BooleanType))),
		field("i96", parquet.Optional(parquet.Leaf(parquet.Int96Type))),
		field("f", parquet.Optional(parquet.Leaf(parquet.FloatType))),
		field("day", parquet.Required(parquet.Date())),
		field("ts_nanos", parquet.Optional(parquet.TimestampAdjusted(parquet.Nanosecond, false))),
		field("ts_millis", parquet.Optional(parquet.Timestamp(parquet.Millisecond))),
	)
	schema := value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.Long},
		{Name: "d_long", Type: value.Long, Nullable: true},
		{Name: "d_str", Type: value.String, Nullable: true},
		{Name: "d_req_str", Type: value.String},
		{Name: "d_ts", Type: value.Timestamp, Nullable: true},
		{Name: "d_dec", Type: value.DecimalType{Precision: 20, Scale: 4}, Nullable: true},
		{Name: "delta_int", Type: value.Long, Nullable: true},
		{Name: "delta_str", Type: value.String, Nullable: true},
		{Name: "delta_bin", Type: value.Binary, Nullable: true},
		{Name: "split", Type: value.Double, Nullable: true},
		{Name: "flag", Type: value.Boolean, Nullable: true},
		{Name: "i96", Type: value.TimestampNTZ, Nullable: true},
		{Name: "f", Type: value.Double, Nullable: true},
		{Name: "day", Type: value.Date},
		{Name: "ts_nanos", Type: value.TimestampNTZ, Nullable: true},
		{Name: "ts_millis", Type: value.Timestamp, Nullable: true},
	}}
	rng := rand.New(rand.NewPCG(3, 4))
	rows := make([]parquet.Row, 3000)
	for i := range rows {
		opt := func(col int, v parquet.Value) parquet.Value {
			if rng.IntN(4) == 0 {
				return parquet.NullValue().Level(0, 0, col)
			}
			return v.Level(0, 1, col)
		}
		dec := make([]byte, 9)
		dec[8], dec[7] = byte(rng.IntN(256)), byte(rng.IntN(4))
		if rng.IntN(2) == 0 {
			for j := range 7 {
				dec[j] = 0xFF
			}
		}
		rows[i] = parquet.Row{
			parquet.Int64Value(int64(i)).Level(0, 0, 0),
			opt(1, parquet.Int64Value(int64(rng.IntN(20)))),
			opt(2, parquet.ByteArrayValue([]byte(fmt.Sprintf("value %d", rng.IntN(30))))),
			parquet.ByteArrayValue([]byte([]string{"INSERT", "UPDATE", "DELETE"}[i/100%3])).Level(0, 0, 3),
			opt(4, parquet.Int64Value(1_700_000_000_000+int64(rng.IntN(50)))),
			opt(5, parquet.FixedLenByteArrayValue(dec)),
			opt(6, parquet.Int32Value(rng.Int32()-rng.Int32())),
			opt(7, parquet.ByteArrayValue([]byte(pqRandString(rng)))),
			opt(8, parquet.ByteArrayValue([]byte(pqRandString(rng)))),
			opt(9, parquet.DoubleValue(rng.NormFloat64())),
			opt(10, parquet.BooleanValue(rng.IntN(2) == 0)),
			opt(11, parquet.Int96Value(deprecated.Int96{uint32(rng.IntN(1e9)), 0, uint32(2451545 + rng.IntN(9000))})),
			opt(12, parquet.FloatValue(float32(rng.NormFloat64()))),
			parquet.Int32Value(int32(rng.IntN(30000))).Level(0, 0, 13),
			opt(14, parquet.Int64Value(rng.Int64N(4e18)-2e18)),
			opt(15, parquet.Int64Value(rng.Int64N(4e15)-2e15)),
		}
	}
	for _, version := range []int{1, 2} {
		t.Run(fmt.Sprintf("in data pages v%d the same rows are read", version), func(t *testing.T) {
			var buf bytes.Buffer
			w := parquet.NewWriter(&buf, parquet.NewSchema("other", root), parquet.DataPageVersion(version), parquet.PageBufferSize(2048), parquet.MaxRowsPerRowGroup(1100))
			if _, err := w.WriteRows(rows); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			for _, frag := range []string{"RLE_DICTIONARY", "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY", "BYTE_STREAM_SPLIT"} {
				if !pqFileUses(t, buf.Bytes(), frag) {
					t.Fatalf("test file has no %s page", frag)
				}
			}
			store := newPQMemStore()
			store.objects["other.parquet"] = buf.Bytes()
			add := Add{Path: "other.parquet", Size: int64(buf.Len())}
			md := pqMetadata(schema, nil, nil)
			got := flSame(t, store, md, add, ReadOptions{})
			if len(got) != len(rows) || got[7][3] != "INSERT" || got[2999][0] != int64(2999) {
				t.Fatalf("read %d rows: %v ... %v", len(got), got[7], got[len(got)-1])
			}
			flSame(t, store, md, add, ReadOptions{KeepRows: true})
			flSame(t, store, md, add, ReadOptions{Columns: []string{"d_dec", "d_str", "flag"}, KeepRows: true})
		})
	}
}

// pqFileUses reports whether a column chunk of the Parquet file data has
// pages of the named encoding.
func pqFileUses(t *testing.T, data []byte, enc string) bool {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, rg := range f.Metadata().RowGroups {
		for _, c := range rg.Columns {
			for _, e := range c.MetaData.Encoding {
				if e.String() == enc {
					return true
				}
			}
		}
	}
	return false
}

// BenchmarkReadFileDictionary reads a file of dictionary-encoded columns,
// as other writers write them, through the flat read and through the
// generic record assembly.
func BenchmarkReadFileDictionary(b *testing.B) {
	field := func(name string, n parquet.Node) parquet.Field { return parquetfile.NamedField(name, n) }
	dict := func(n parquet.Node) parquet.Node { return parquet.Optional(parquet.Encoded(n, &parquet.RLEDictionary)) }
	root := parquetfile.NewGroup(
		field("country", dict(parquet.String())), field("status", dict(parquet.String())),
		field("store", dict(parquet.Leaf(parquet.Int64Type))), field("day", dict(parquet.Timestamp(parquet.Microsecond))),
	)
	schema := value.StructType{Fields: []value.Field{
		{Name: "country", Type: value.String, Nullable: true}, {Name: "status", Type: value.String, Nullable: true},
		{Name: "store", Type: value.Long, Nullable: true}, {Name: "day", Type: value.Timestamp, Nullable: true},
	}}
	var buf bytes.Buffer
	w := parquet.NewWriter(&buf, parquet.NewSchema("dict", root), parquet.MaxRowsPerRowGroup(16<<10))
	rows := make([]parquet.Row, pqBenchRows)
	for i := range rows {
		rows[i] = parquet.Row{
			parquet.ByteArrayValue([]byte(fmt.Sprintf("country %d", i*7%190))).Level(0, 1, 0),
			parquet.ByteArrayValue([]byte(flOps[i*13%len(flOps)])).Level(0, 1, 1),
			parquet.Int64Value(int64(i*31%500)).Level(0, 1, 2),
			parquet.Int64Value(1_700_000_000_000_000+int64(i%365)*86_400_000_000).Level(0, 1, 3),
		}
	}
	if _, err := w.WriteRows(rows); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	store := newPQMemStore()
	store.objects["dict.parquet"] = buf.Bytes()
	add := Add{Path: "dict.parquet", Size: int64(buf.Len())}
	md := pqMetadata(schema, nil, nil)
	for _, tc := range []struct {
		name string
		opts ReadOptions
	}{{"flat", ReadOptions{}}, {"assembled", ReadOptions{assemble: true}}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				if err := ReadFile(context.Background(), store, md, add, tc.opts, func([]any) error { n++; return nil }); err != nil || n != pqBenchRows {
					b.Fatalf("read %d rows: %v", n, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/pqBenchRows, "ns/row")
		})
	}
}

// FuzzFlatReadMatchesTheAssembly reads a mutated data file through the
// flat read and through the generic record assembly: where both read it,
// they must return the same rows at the same positions, and neither may
// panic. (Of a corrupt file they may stop at different rows: the flat read
// fails on a page holding fewer values than its levels say, which the
// assembly reads on into the next page.)
func FuzzFlatReadMatchesTheAssembly(f *testing.F) {
	fzAddSeeds(f)
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		md, _, _ := fzTable(kind)
		store, add := fzStore(t, b)
		for _, opts := range []ReadOptions{{}, {KeepRows: true}} {
			var wantPos, gotPos []int64
			var want, got [][]any
			wantErr := ckWithin(t, func() (err error) {
				wantPos, want, err = flRead(store, md, add, opts, true)
				return err
			})
			gotErr := ckWithin(t, func() (err error) {
				gotPos, got, err = flRead(store, md, add, opts, false)
				return err
			})
			fzCheckErr(t, gotErr, add.Path)
			if gotErr != nil || wantErr != nil {
				continue
			}
			if !slices.Equal(gotPos, wantPos) {
				t.Fatalf("flat read returned rows at %v, assembled at %v", gotPos, wantPos)
			}
			for i := range want {
				for c := range want[i] {
					if err := sameValue(got[i][c], want[i][c]); err != nil {
						t.Fatalf("row %d, column %d: %v", i, c, err)
					}
				}
			}
		}
	})
}

// TestFromRowSkipsTheRowGroupsBeforeIt reads a file of several row groups
// from positions at, inside and past its row groups' bounds, flat and
// through the record assembly: the rows returned are those at or after
// the position, and the row groups that end before it are not read.
func TestFromRowSkipsTheRowGroupsBeforeIt(t *testing.T) {
	store := newPQMemStore()
	const rows, group = 1000, 128
	add := pqWriteRows(t, store, WriteOptions{Schema: flStagedSchema(), RowGroupRows: group}, rows, flStagedRow)
	md := Metadata{SchemaString: flStagedSchema().SchemaString()}
	groups := (rows + group - 1) / group
	for _, assemble := range []bool{false, true} {
		for _, from := range []int64{0, 1, group - 1, group, 3*group + 5, rows - 1, rows, rows + 10} {
			var st parquetfile.ReadStats
			ctx := parquetfile.WithReadStats(context.Background(), &st)
			var got []int64
			err := ReadFileAt(ctx, store, md, add, ReadOptions{FromRow: from, KeepRows: true, assemble: assemble}, func(pos int64, row []any) error {
				if want := flStagedRow(int(pos)); !pqEqual(row, want) {
					return fmt.Errorf("row at %d is %v, want %v", pos, row, want)
				}
				got = append(got, pos)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			first := min(from, rows)
			if int64(len(got)) != rows-first || len(got) > 0 && (got[0] != first || got[len(got)-1] != rows-1) {
				t.Fatalf("assemble %v, from %d: read positions %d..., %d rows, want %d.. %d", assemble, from, got[:min(len(got), 1)], len(got), first, rows-1)
			}
			want := 0 // the row groups that end past from
			for g := range groups {
				if int64(min((g+1)*group, rows)) > from {
					want++
				}
			}
			if st.Dense != want {
				t.Fatalf("assemble %v, from %d: %d row groups read, want %d", assemble, from, st.Dense, want)
			}
		}
	}
}

// TestAnOpenedFileReadsAsAFreshOne reads a file of several row groups
// through one OpenFile several times, from several positions and with a
// row-group filter, and checks each read against a read that opens the
// file itself; reading another file with it fails.
func TestAnOpenedFileReadsAsAFreshOne(t *testing.T) {
	store := newPQMemStore()
	ctx := context.Background()
	add := pqWriteRows(t, store, WriteOptions{Schema: flStagedSchema(), RowGroupRows: 128}, 1000, flStagedRow)
	other := pqWriteRows(t, store, WriteOptions{Schema: flStagedSchema()}, 10, flStagedRow)
	md := Metadata{SchemaString: flStagedSchema().SchemaString()}
	opened, err := OpenFile(ctx, store, add)
	if err != nil {
		t.Fatal(err)
	}
	read := func(add Add, opts ReadOptions) ([]int64, error) {
		var got []int64
		err := ReadFileAt(ctx, store, md, add, opts, func(pos int64, row []any) error {
			if !pqEqual(row, flStagedRow(int(pos))) {
				return fmt.Errorf("row at %d is %v", pos, row)
			}
			got = append(got, pos)
			return nil
		})
		return got, err
	}
	filter := &RowGroupFilter{Column: "id", Keep: func(lo, hi any) bool { return lo.(int64) < 3000 }}
	for _, opts := range []ReadOptions{{}, {KeepRows: true, FromRow: 256}, {FromRow: 900}, {RowGroupFilter: filter}, {}} {
		want, err := read(add, opts)
		if err != nil {
			t.Fatal(err)
		}
		opts.Opened = opened
		got, err := read(add, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) || len(got) == 0 {
			t.Fatalf("read %d rows through the opened file, want %d", len(got), len(want))
		}
		// Held open between reads, it holds no read buffer (a merge
		// holds every part of its batch open).
		if n := opened.ra.BufferBytes(); n != 0 {
			t.Fatalf("the opened file holds %d bytes of read buffer between reads", n)
		}
	}
	if _, err := read(other, ReadOptions{Opened: opened}); err == nil {
		t.Fatal("another file was read with the opened file")
	}
}
