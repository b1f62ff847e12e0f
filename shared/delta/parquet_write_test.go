package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/parquet-go/parquet-go"
)

func pqDec(s string) value.Decimal {
	d, err := value.ParseDecimal(s)
	if err != nil {
		panic(err)
	}
	return d
}

// allTypesSchema covers every Delta type the writer maps, nested included.
func pqAllTypesSchema() value.StructType {
	f := func(name string, t value.Type, nullable bool) value.Field {
		return value.Field{Name: name, Type: t, Nullable: nullable}
	}
	return value.StructType{Fields: []value.Field{
		f("id", value.Long, false),
		f("b", value.Byte, true),
		f("s", value.Short, true),
		f("i", value.Integer, true),
		f("f", value.Float, true),
		f("d", value.Double, true),
		f("ok", value.Boolean, true),
		f("str", value.String, true),
		f("bin", value.Binary, true),
		f("day", value.Date, true),
		f("ts", value.Timestamp, true),
		f("ntz", value.TimestampNTZ, true),
		f("d9", value.DecimalType{Precision: 9, Scale: 2}, true),
		f("d18", value.DecimalType{Precision: 18, Scale: 6}, true),
		f("d38", value.DecimalType{Precision: 38, Scale: 10}, true),
		f("addr", value.StructType{Fields: []value.Field{
			f("zip", value.String, true),
			f("geo", value.StructType{Fields: []value.Field{f("lat", value.Double, false), f("lon", value.Double, true)}}, true),
		}}, true),
		f("tags", value.ArrayType{Element: value.String, ContainsNull: true}, true),
		f("matrix", value.ArrayType{Element: value.ArrayType{Element: value.Integer, ContainsNull: false}, ContainsNull: true}, true),
		f("attrs", value.MapType{Key: value.String, Value: value.Long, ValueContainsNull: true}, true),
		f("items", value.ArrayType{Element: value.StructType{Fields: []value.Field{f("sku", value.String, false), f("qty", value.Integer, true)}}, ContainsNull: true}, true),
		f("nested_map", value.MapType{Key: value.Integer, Value: value.MapType{Key: value.String, Value: value.ArrayType{Element: value.Long, ContainsNull: true}, ValueContainsNull: true}, ValueContainsNull: true}, true),
	}}
}

func pqAllTypesRows() [][]any {
	return [][]any{
		{int64(1), int8(-128), int16(-32768), int32(math.MinInt32), float32(1.5), 2.25, true, "héllo wörld ✓ 𝄞", []byte{0, 1, 2, 255}, value.Days(-1), value.Micros(-1), value.LocalMicros(1_700_000_000_123_456),
			pqDec("-1234567.89"), pqDec("123456789012.345678"), pqDec("-1234567890123456789012345678.0123456789"),
			[]any{"01000", []any{48.85, nil}}, []any{"a", nil, ""}, []any{[]any{int32(1), int32(2)}, []any{}, nil},
			[]value.MapEntry{{Key: "x", Value: int64(1)}, {Key: "y", Value: nil}},
			[]any{[]any{"A", int32(2)}, nil, []any{"B", nil}},
			[]value.MapEntry{{Key: int32(1), Value: []value.MapEntry{{Key: "k", Value: []any{int64(1), nil}}, {Key: "e", Value: []any{}}, {Key: "n", Value: nil}}}, {Key: int32(2), Value: nil}}},
		{int64(2), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil},
		{int64(3), int8(127), int16(32767), int32(math.MaxInt32), float32(math.NaN()), math.Inf(-1), false, "", []byte{}, value.Days(-719162), value.Micros(-62135596800000000), value.LocalMicros(-1),
			pqDec("0.01"), pqDec("-0.000001"), pqDec("9999999999999999999999999999.9999999999"),
			[]any{nil, nil}, []any{}, []any{}, []value.MapEntry{}, []any{}, []value.MapEntry{}},
		{int64(4), int8(0), int16(0), int32(0), float32(math.Copysign(0, -1)), math.NaN(), true, strings.Repeat("日本", 40), []byte("x"), value.Days(20000), value.Micros(1_700_000_000_000_001), value.LocalMicros(0),
			pqDec("0.00"), pqDec("0.000000"), pqDec("0.0000000000"),
			[]any{"z", []any{-90.0, 180.0}}, []any{nil}, []any{nil, []any{int32(-1)}}, []value.MapEntry{{Key: "", Value: int64(-5)}}, []any{[]any{"", nil}},
			[]value.MapEntry{{Key: int32(0), Value: []value.MapEntry{}}}},
	}
}

func pqWrite(t *testing.T, store *pqMemStore, opts WriteOptions, rows [][]any) Add {
	t.Helper()
	return pqWriteRows(t, store, opts, len(rows), func(i int) []any { return rows[i] })
}

func pqRead(t *testing.T, store *pqMemStore, md Metadata, add Add, opts ReadOptions) [][]any {
	t.Helper()
	var rows [][]any
	err := ReadFile(context.Background(), store, md, add, opts, func(r []any) error {
		rows = append(rows, r)
		return nil
	})
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	return rows
}

func pqMetadata(schema value.StructType, partCols []string, conf map[string]string) Metadata {
	return Metadata{ID: "test", Format: Format{Provider: "parquet"}, SchemaString: schema.SchemaString(), PartitionColumns: partCols, Configuration: conf}
}

func TestWrittenRowsReadBackEqual(t *testing.T) {
	schema := pqAllTypesSchema()
	rows := pqAllTypesRows()
	for _, codec := range []Compression{CompressionSnappy, CompressionZstd, CompressionGzip, CompressionNone} {
		t.Run("with "+string(codec)+" compression every type round-trips", func(t *testing.T) {
			store := newPQMemStore()
			add := pqWrite(t, store, WriteOptions{Schema: schema, Compression: codec, DataChange: true}, rows)
			got := pqRead(t, store, pqMetadata(schema, nil, nil), add, ReadOptions{})
			if len(got) != len(rows) {
				t.Fatalf("read %d rows, want %d", len(got), len(rows))
			}
			for i := range rows {
				if !pqEqual(got[i], rows[i]) {
					t.Errorf("row %d:\n got %#v\nwant %#v", i, got[i], rows[i])
				}
			}
			suffix := map[Compression]string{CompressionSnappy: ".snappy.parquet", CompressionZstd: ".zstd.parquet", CompressionGzip: ".gz.parquet", CompressionNone: "-c000.parquet"}[codec]
			if !strings.HasPrefix(add.Path, "part-00000-") || !strings.HasSuffix(add.Path, suffix) {
				t.Errorf("path %q does not look like part-00000-<uuid>-c000%s", add.Path, suffix)
			}
			if st, _ := store.Stat(context.Background(), add.Path); st.Size != add.Size || add.Size == 0 {
				t.Errorf("add.size = %d, object has %d bytes", add.Size, st.Size)
			}
			if !add.DataChange || add.ModificationTime == 0 || len(add.PartitionValues) != 0 {
				t.Errorf("add = %+v, want dataChange, a modification time and no partition values", add)
			}
		})
	}
}

func TestDecimalsOfEveryPrecisionRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var fields []value.Field
	for p := 1; p <= 38; p++ {
		fields = append(fields, value.Field{Name: "p" + pqItoa(p), Type: value.DecimalType{Precision: p, Scale: p / 3}, Nullable: true})
	}
	schema := value.StructType{Fields: fields}
	var rows [][]any
	for r := range 600 { // more than a slab of a writer's decimal bytes (256 values)
		row := make([]any, len(fields))
		for i := range fields {
			p := i + 1
			limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p)), nil)
			var u *big.Int
			switch r {
			case 0: // the largest magnitude the precision allows
				u = new(big.Int).Sub(limit, big.NewInt(1))
			case 1:
				u = new(big.Int).Neg(new(big.Int).Sub(limit, big.NewInt(1)))
			case 2:
				row[i] = nil
				continue
			case 3, 4, 5, 6: // around the 64-bit range, where precisions above 18 encode without big.Int
				if p < 19 {
					u = big.NewInt(int64(r - 5))
					break
				}
				u = [...]*big.Int{big.NewInt(math.MinInt64), new(big.Int).Add(big.NewInt(math.MaxInt64), big.NewInt(1)), big.NewInt(-1), new(big.Int).Sub(big.NewInt(math.MinInt64), big.NewInt(1))}[r-3]
			default:
				digits := make([]byte, 1+rng.IntN(p))
				for k := range digits {
					digits[k] = byte('0' + rng.IntN(10))
				}
				u, _ = new(big.Int).SetString(string(digits), 10)
				if rng.IntN(2) == 0 {
					u.Neg(u)
				}
			}
			row[i] = value.Decimal{Unscaled: u, Scale: p / 3}
		}
		rows = append(rows, row)
	}
	store := newPQMemStore()
	add := pqWrite(t, store, WriteOptions{Schema: schema}, rows)
	got := pqRead(t, store, pqMetadata(schema, nil, nil), add, ReadOptions{})
	for i := range rows {
		if !pqEqual(got[i], rows[i]) {
			t.Errorf("row %d differs:\n got %v\nwant %v", i, got[i], rows[i])
		}
	}
}

func TestWriteRejectsValuesThatDoNotFitTheColumn(t *testing.T) {
	schema := value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.Long, Nullable: false},
		{Name: "amt", Type: value.DecimalType{Precision: 4, Scale: 2}, Nullable: true},
	}}
	for _, tc := range []struct {
		name string
		row  []any
	}{
		{"a null in a non-nullable column", []any{nil, nil}},
		{"an int where a long is due", []any{int32(1), nil}},
		{"a decimal with more digits than the precision", []any{int64(1), pqDec("123.45")}},
		{"a decimal with more fraction digits than the scale", []any{int64(1), pqDec("1.234")}},
		{"a row with too few values", []any{int64(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewFileWriter(context.Background(), newPQMemStore(), WriteOptions{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			if err := w.Write(tc.row); err == nil {
				t.Errorf("Write(%v) succeeded", tc.row)
			}
		})
	}
}

func TestARowRefusedPartWayLeavesNothingInTheFile(t *testing.T) {
	flat := value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.Long},
		{Name: "name", Type: value.String, Nullable: true},
		{Name: "amt", Type: value.DecimalType{Precision: 4, Scale: 2}, Nullable: true},
	}}
	nested := value.StructType{Fields: append(slices.Clone(flat.Fields),
		value.Field{Name: "tags", Type: value.ArrayType{Element: value.String, ContainsNull: true}, Nullable: true})}
	for _, tc := range []struct {
		name   string
		schema value.StructType
		good   func(i int) []any
		bad    []any
	}{
		// The refused value comes after columns already taken.
		{"flat schema", flat, func(i int) []any { return []any{int64(i), fmt.Sprint("n", i), pqDec("1.25")} }, []any{int64(99), "bad", pqDec("123.45")}},
		{"flat schema, null in a non-nullable column", flat, func(i int) []any { return []any{int64(i), fmt.Sprint("n", i), nil} }, []any{nil, "bad", nil}},
		{"nested schema", nested, func(i int) []any { return []any{int64(i), fmt.Sprint("n", i), nil, []any{"a"}} }, []any{int64(99), "bad", nil, []any{int64(1)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newPQMemStore()
			ctx := context.Background()
			w, err := NewFileWriter(ctx, store, WriteOptions{Schema: tc.schema})
			if err != nil {
				t.Fatal(err)
			}
			var want [][]any
			for i := range 3000 { // across a batch hand-over to parquet-go
				if i%1000 == 500 {
					if err := w.Write(tc.bad); err == nil {
						t.Fatalf("Write(%v) succeeded", tc.bad)
					}
				}
				r := tc.good(i)
				if err := w.Write(r); err != nil {
					t.Fatal(err)
				}
				want = append(want, r)
			}
			add, err := w.Close(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := pqRead(t, store, pqMetadata(tc.schema, nil, nil), add, ReadOptions{})
			if len(got) != len(want) {
				t.Fatalf("read %d rows, want %d", len(got), len(want))
			}
			for i := range want {
				if !pqEqual(got[i], want[i]) {
					t.Fatalf("row %d = %v, want %v", i, got[i], want[i])
				}
			}
			if st, _ := ParseStats(add.Stats); st.NumRecords != int64(len(want)) {
				t.Errorf("numRecords = %d, want %d", st.NumRecords, len(want))
			}
		})
	}
}

func TestPartitionedWriteStoresValuesInTheLogNotTheFile(t *testing.T) {
	schema := value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.Long},
		{Name: "region", Type: value.String, Nullable: true},
		{Name: "day", Type: value.Date, Nullable: true},
		{Name: "v", Type: value.String, Nullable: true},
	}}
	part := []string{"region", "day"}
	store := newPQMemStore()
	opts := WriteOptions{Schema: schema, PartitionColumns: part, PartitionValues: map[string]any{"region": "eu west/1:a%", "day": nil}, Dir: "data"}
	rows := [][]any{{int64(1), "eu west/1:a%", nil, "x"}, {int64(2), "eu west/1:a%", nil, nil}}
	add := pqWrite(t, store, opts, rows)

	wantDir := "data/region=eu%20west%252F1%253Aa%2525/day=__HIVE_DEFAULT_PARTITION__/part-00000-"
	if !strings.HasPrefix(add.Path, wantDir) {
		t.Errorf("path = %q, want prefix %q", add.Path, wantDir)
	}
	if v := add.PartitionValues["region"]; v == nil || *v != "eu west/1:a%" {
		t.Errorf("partitionValues[region] = %v", v)
	}
	if v, ok := add.PartitionValues["day"]; !ok || v != nil {
		t.Errorf("partitionValues[day] = %v, %v; want an explicit null", v, ok)
	}
	name, _ := decodeAddPath(add.Path)
	f, err := parquet.OpenFile(bytes.NewReader(store.objects[name]), int64(len(store.objects[name])))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Schema().Columns() {
		if c[0] == "region" || c[0] == "day" {
			t.Errorf("partition column %v is stored in the file", c)
		}
	}
	got := pqRead(t, store, pqMetadata(schema, part, nil), add, ReadOptions{})
	for i := range rows {
		if !pqEqual(got[i], rows[i]) {
			t.Errorf("row %d = %v, want %v", i, got[i], rows[i])
		}
	}
	st, err := ParseStats(add.Stats)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.NullCount["region"]; ok {
		t.Errorf("stats cover partition column region: %s", add.Stats)
	}

	t.Run("a row of another partition is refused", func(t *testing.T) {
		w, err := NewFileWriter(context.Background(), store, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Abort()
		if err := w.Write([]any{int64(3), "us", nil, nil}); !errors.Is(err, ErrPartitionValue) {
			t.Errorf("err = %v, want ErrPartitionValue", err)
		}
	})
}

func TestWrittenParquetHasTheDeltaPhysicalTypes(t *testing.T) {
	store := newPQMemStore()
	add := pqWrite(t, store, WriteOptions{Schema: pqAllTypesSchema()}, pqAllTypesRows())
	name, _ := decodeAddPath(add.Path)
	b := store.objects[name]
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	want := `message spark_schema {
	required int64 id (INT(64,true));
	optional int32 b (INT(8,true));
	optional int32 s (INT(16,true));
	optional int32 i (INT(32,true));
	optional float f;
	optional double d;
	optional boolean ok;
	optional binary str (STRING);
	optional binary bin;
	optional int32 day (DATE);
	optional int64 ts (TIMESTAMP(isAdjustedToUTC=true,unit=MICROS));
	optional int64 ntz (TIMESTAMP(isAdjustedToUTC=false,unit=MICROS));
	optional int32 d9 (DECIMAL(9,2));
	optional int64 d18 (DECIMAL(18,6));
	optional fixed_len_byte_array(16) d38 (DECIMAL(38,10));
	optional group addr {
		optional binary zip (STRING);
		optional group geo {
			required double lat;
			optional double lon;
		}
	}
	optional group tags (LIST) {
		repeated group list {
			optional binary element (STRING);
		}
	}
	optional group matrix (LIST) {
		repeated group list {
			optional group element (LIST) {
				repeated group list {
					required int32 element (INT(32,true));
				}
			}
		}
	}
	optional group attrs (MAP) {
		repeated group key_value {
			required binary key (STRING);
			optional int64 value (INT(64,true));
		}
	}
	optional group items (LIST) {
		repeated group list {
			optional group element {
				required binary sku (STRING);
				optional int32 qty (INT(32,true));
			}
		}
	}
	optional group nested_map (MAP) {
		repeated group key_value {
			required int32 key (INT(32,true));
			optional group value (MAP) {
				repeated group key_value {
					required binary key (STRING);
					optional group value (LIST) {
						repeated group list {
							optional int64 element (INT(64,true));
						}
					}
				}
			}
		}
	}
}`
	if got := strings.TrimSpace(f.Schema().String()); got != want {
		t.Errorf("schema:\n%s\nwant:\n%s", got, want)
	}
	// Every data page is a V1 page and byte arrays are PLAIN (Appendix B).
	for _, rg := range f.Metadata().RowGroups {
		for _, c := range rg.Columns {
			for _, e := range c.MetaData.Encoding {
				if e.String() == "DELTA_LENGTH_BYTE_ARRAY" || e.String() == "DELTA_BINARY_PACKED" {
					t.Errorf("column %v uses %v", c.MetaData.PathInSchema, e)
				}
			}
		}
	}
	// parquet-go's own generic reader reads what we wrote.
	n := 0
	for _, rg := range f.RowGroups() {
		rows := rg.Rows()
		buf := make([]parquet.Row, 8)
		for {
			k, err := rows.ReadRows(buf)
			n += k
			if err != nil {
				break
			}
		}
		rows.Close()
	}
	if n != len(pqAllTypesRows()) {
		t.Errorf("parquet-go read %d rows, want %d", n, len(pqAllTypesRows()))
	}
}

func TestSmallRowGroupsAndDeletionVectorsSpanGroups(t *testing.T) {
	schema := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long}, {Name: "pad", Type: value.String, Nullable: true}}}
	var rows [][]any
	for i := range 3000 {
		rows = append(rows, []any{int64(i), strings.Repeat("p", i%50)})
	}
	store := newPQMemStore()
	add := pqWrite(t, store, WriteOptions{Schema: schema, RowGroupBytes: 8 << 10}, rows)
	name, _ := decodeAddPath(add.Path)
	b := store.objects[name]
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.RowGroups()) < 3 {
		t.Fatalf("wrote %d row groups, want several", len(f.RowGroups()))
	}
	deleted := []uint64{0, 1, 511, 512, 1500, 2999}
	add.DeletionVector = pqInlineDV(t, deleted)
	got := pqRead(t, store, pqMetadata(schema, nil, nil), add, ReadOptions{Columns: []string{"id"}})
	if len(got) != len(rows)-len(deleted) {
		t.Fatalf("read %d rows, want %d", len(got), len(rows)-len(deleted))
	}
	gone := map[int64]bool{}
	for _, d := range deleted {
		gone[int64(d)] = true
	}
	next := int64(0)
	for _, r := range got {
		for gone[next] {
			next++
		}
		if r[0] != next {
			t.Fatalf("read id %v, want %d", r[0], next)
		}
		next++
	}
}

func TestAbortLeavesNoObject(t *testing.T) {
	store := newPQMemStore()
	schema := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long}}}
	w, err := NewFileWriter(context.Background(), store, WriteOptions{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write([]any{int64(1)}); err != nil {
		t.Fatal(err)
	}
	w.Abort()
	if len(store.objects) != 0 {
		t.Errorf("objects after abort: %v", store.objects)
	}
	if err := w.Write([]any{int64(2)}); !errors.Is(err, ErrWriterClosed) {
		t.Errorf("Write after Abort = %v, want ErrWriterClosed", err)
	}
}

func TestRowsAndBytesWrittenGrowWithTheFile(t *testing.T) {
	store := newPQMemStore()
	schema := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long}, {Name: "s", Type: value.String}}}
	w, err := NewFileWriter(context.Background(), store, WriteOptions{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if err := w.Write([]any{int64(i), strings.Repeat("x", 100)}); err != nil {
			t.Fatal(err)
		}
	}
	if w.Rows() != 1000 {
		t.Errorf("Rows() = %d, want 1000", w.Rows())
	}
	if n := w.BytesWritten(); n < 100_000 {
		t.Errorf("BytesWritten() = %d, want at least the 100 kB of raw strings", n)
	}
	if _, err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestColumnMappingWritesPhysicalNamesAndReadsThemBack(t *testing.T) {
	meta := func(id int, phys string) map[string]any {
		return map[string]any{"delta.columnMapping.id": float64(id), "delta.columnMapping.physicalName": phys}
	}
	schema := value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.Long, Metadata: meta(1, "col-a")},
		{Name: "p", Type: value.String, Nullable: true, Metadata: meta(2, "col-p")},
		{Name: "s", Type: value.StructType{Fields: []value.Field{{Name: "x", Type: value.Integer, Nullable: true, Metadata: meta(4, "col-x")}}}, Nullable: true, Metadata: meta(3, "col-s")},
	}}
	for _, mode := range []string{ColumnMappingName, ColumnMappingID} {
		t.Run("mode "+mode, func(t *testing.T) {
			store := newPQMemStore()
			rows := [][]any{{int64(1), "k", []any{int32(5)}}, {int64(2), "k", nil}}
			add := pqWrite(t, store, WriteOptions{Schema: schema, PartitionColumns: []string{"p"}, PartitionValues: map[string]any{"p": "k"}, ColumnMappingMode: mode}, rows)
			if !strings.HasPrefix(add.Path, "col-p=k/") || add.PartitionValues["col-p"] == nil {
				t.Errorf("add = %+v, want partition keyed by physical name", add)
			}
			if !strings.Contains(add.Stats, `"col-s":{"col-x":5}`) {
				t.Errorf("stats %s are not keyed by physical names", add.Stats)
			}
			// A top-level leaf's bounds are read from the footer, its
			// column found there by its physical name or id.
			if !strings.Contains(add.Stats, `"minValues":{"col-a":1`) || !strings.Contains(add.Stats, `"maxValues":{"col-a":2`) {
				t.Errorf("stats %s lack the bounds of col-a", add.Stats)
			}
			md := pqMetadata(schema, []string{"p"}, map[string]string{"delta.columnMapping.mode": mode})
			got := pqRead(t, store, md, add, ReadOptions{})
			for i := range rows {
				if !pqEqual(got[i], rows[i]) {
					t.Errorf("row %d = %v, want %v", i, got[i], rows[i])
				}
			}
		})
	}
}

func TestColumnsAbsentFromAFileReadAsNull(t *testing.T) {
	old := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long}}}
	store := newPQMemStore()
	add := pqWrite(t, store, WriteOptions{Schema: old}, [][]any{{int64(7)}})
	evolved := value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.Long},
		{Name: "added", Type: value.String, Nullable: true},
		{Name: "st", Type: value.StructType{Fields: []value.Field{{Name: "a", Type: value.Integer, Nullable: true}}}, Nullable: true},
	}}
	got := pqRead(t, store, pqMetadata(evolved, nil, nil), add, ReadOptions{})
	if want := []any{int64(7), nil, nil}; len(got) != 1 || !pqEqual(got[0], want) {
		t.Errorf("rows = %v, want [%v]", got, want)
	}
}

func pqItoa(i int) string { return big.NewInt(int64(i)).String() }

// pqCDCSchema is a typical current-state table: source columns plus the
// _ds_ metadata columns.
func pqCDCSchema() value.StructType {
	f := func(name string, t value.Type, nullable bool) value.Field {
		return value.Field{Name: name, Type: t, Nullable: nullable}
	}
	return value.StructType{Fields: []value.Field{
		f("id", value.Long, false),
		f("customer", value.String, true),
		f("email", value.String, true),
		f("amount", value.DecimalType{Precision: 18, Scale: 2}, true),
		f("quantity", value.Integer, true),
		f("active", value.Boolean, true),
		f("score", value.Double, true),
		f("created_at", value.Timestamp, true),
		f("updated_on", value.Date, true),
		f("_ds_source_timestamp", value.Timestamp, false),
		f("_ds_change_type", value.String, false),
		f("_ds_position", value.String, true),
		f("_ds_order", value.Binary, false),
	}}
}

func pqCDCRow(i int) []any {
	return []any{int64(i), fmt.Sprintf("customer %d", i%5000), fmt.Sprintf("user%d@example.com", i), value.Decimal{Unscaled: big.NewInt(int64(i*37) % 1_000_000), Scale: 2},
		int32(i % 100), i%3 == 0, float64(i) / 7, value.Micros(1_700_000_000_000_000 + int64(i)*1000), value.Days(19000 + i%365),
		value.Micros(1_700_000_000_000_000 + int64(i)), "UPDATE-INSERT", fmt.Sprintf("mysql-bin.000123:%d", i), []byte{0, 0, 0, byte(i >> 16), byte(i >> 8), byte(i)}}
}

const pqBenchRows = 100_000

// pqCDCFile writes rows rows of pqCDCSchema (pqCDCRow) into one data file
// of store, with opts (whose Schema it sets).
func pqCDCFile(b testing.TB, store *pqMemStore, opts WriteOptions, rows int) Add {
	opts.Schema = pqCDCSchema()
	return pqWriteRows(b, store, opts, rows, pqCDCRow)
}

func BenchmarkWriteFile(b *testing.B) {
	schema := pqCDCSchema()
	rows := make([][]any, pqBenchRows)
	for i := range rows {
		rows[i] = pqCDCRow(i)
	}
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		w, err := NewFileWriter(ctx, newPQMemStore(), WriteOptions{Schema: schema})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rows {
			if err := w.Write(r); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := w.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(pqBenchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func TestCloseReportsAnUploadThatFailed(t *testing.T) {
	store := newPQMemStore()
	store.objects["taken.parquet"] = []byte("x")
	schema := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long}}}
	w, err := NewFileWriter(context.Background(), store, WriteOptions{Schema: schema, FileName: "taken.parquet"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write([]any{int64(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Close(context.Background()); !errors.Is(err, objstore.ErrExists) {
		t.Errorf("Close = %v, want ErrExists: data files are never overwritten", err)
	}
	if string(store.objects["taken.parquet"]) != "x" {
		t.Error("the existing object was replaced")
	}
}

func TestIDModeMatchesColumnsByFieldIDBeforeName(t *testing.T) {
	meta := func(id int, phys string) map[string]any {
		return map[string]any{"delta.columnMapping.id": float64(id), "delta.columnMapping.physicalName": phys}
	}
	written := value.StructType{Fields: []value.Field{
		{Name: "a", Type: value.Long, Metadata: meta(1, "col-1")},
		{Name: "b", Type: value.Long, Metadata: meta(2, "col-2")},
	}}
	store := newPQMemStore()
	add := pqWrite(t, store, WriteOptions{Schema: written, ColumnMappingMode: ColumnMappingID}, [][]any{{int64(10), int64(20)}})
	// Physical names that no longer match anything (as after a rename by an
	// id-based engine): ids still find the columns; without an id the name
	// is used.
	read := value.StructType{Fields: []value.Field{
		{Name: "b", Type: value.Long, Metadata: meta(2, "renamed-2")},
		{Name: "a", Type: value.Long, Metadata: map[string]any{"delta.columnMapping.physicalName": "col-1"}},
		{Name: "c", Type: value.Long, Nullable: true, Metadata: meta(3, "col-3")},
	}}
	for _, tc := range []struct {
		mode string
		want []any
	}{
		{ColumnMappingID, []any{int64(20), int64(10), nil}},
		{ColumnMappingName, []any{nil, int64(10), nil}},
	} {
		t.Run("in "+tc.mode+" mode", func(t *testing.T) {
			got := pqRead(t, store, pqMetadata(read, nil, map[string]string{"delta.columnMapping.mode": tc.mode}), add, ReadOptions{})
			if len(got) != 1 || !pqEqual(got[0], tc.want) {
				t.Errorf("rows = %v, want [%v]", got, tc.want)
			}
		})
	}
}

func TestFileWriterCapsRowGroupsAtRowGroupRows(t *testing.T) {
	schema := value.StructType{Fields: []value.Field{{Name: "id", Type: value.Long}}}
	cases := []struct {
		name string
		rows int
		cap  int64
		want []int64
	}{
		{"rows beyond the cap start a new row group", 700, 256, []int64{256, 256, 188}},
		{"a file under the cap is one row group", 100, 256, []int64{100}},
		{"the default cap leaves small files whole", 1000, 0, []int64{1000}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := newPQMemStore()
			var rows [][]any
			for i := range tc.rows {
				rows = append(rows, []any{int64(i)})
			}
			add := pqWrite(t, store, WriteOptions{Schema: schema, RowGroupRows: tc.cap}, rows)
			if got := pqRowGroups(t, store, add); !slices.Equal(got, tc.want) {
				t.Errorf("row groups of %v rows, want %v", got, tc.want)
			}
		})
	}
}

// TestWriteInOrderWritesWhatWriteDoes writes rows in a random order (and
// in the order they come) through WriteInOrder and through Write, row by
// row, into files of several row groups, flat and nested, partitioned and
// not: the files hold the same rows in the same row groups, with the same
// stats. A row refused while the rows are converted fails the call and
// the file. The cases share one ValueArrays: each takes the arrays the
// ones before it gave back. (parquetfile's tests hold the rest: rows
// written in order between rows written one by one, the arrays' bound,
// the first failure in row order, the arrays given back.)
func TestWriteInOrderWritesWhatWriteDoes(t *testing.T) {
	ctx := context.Background()
	arrays := &ValueArrays{}
	nested := value.StructType{Fields: append(slices.Clone(flStagedSchema().Fields),
		value.Field{Name: "tags", Type: value.ArrayType{Element: value.String, ContainsNull: true}, Nullable: true})}
	nestedRow := func(i int) []any {
		r := flStagedRow(i)
		if i%3 == 0 {
			return append(r, nil)
		}
		return append(r, []any{fmt.Sprint("t", i), nil})
	}
	day := value.Days(19000)
	dated := value.StructType{Fields: append([]value.Field{{Name: "day", Type: value.Date}}, flStagedSchema().Fields...)}
	datedRow := func(i int) []any { return append([]any{day}, flStagedRow(i)...) }
	for _, tc := range []struct {
		name   string
		opts   WriteOptions
		row    func(int) []any
		n      int
		sorted bool
	}{
		{"flat", WriteOptions{Schema: flStagedSchema(), RowGroupRows: 500}, flStagedRow, 2345, false},
		{"flat, in order", WriteOptions{Schema: flStagedSchema(), RowGroupRows: 500}, flStagedRow, 2345, true},
		{"flat, fewer rows than a batch", WriteOptions{Schema: flStagedSchema()}, flStagedRow, 77, false},
		{"partitioned", WriteOptions{Schema: dated, RowGroupRows: 300, PartitionColumns: []string{"day"}, PartitionValues: map[string]any{"day": day}}, datedRow, 1000, false},
		{"nested", WriteOptions{Schema: nested, RowGroupRows: 500}, nestedRow, 1500, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var order []int32
			if !tc.sorted {
				order = make([]int32, tc.n)
				for i, j := range rand.New(rand.NewPCG(uint64(tc.n), 3)).Perm(tc.n) {
					order[i] = int32(j)
				}
			}
			at := func(j int) int {
				if order == nil {
					return j
				}
				return int(order[j])
			}
			store := newPQMemStore()
			byRow := pqWriteRows(t, store, tc.opts, tc.n, func(j int) []any { return tc.row(at(j)) })
			opts := tc.opts
			opts.ValueArrays = arrays
			w, err := NewFileWriter(ctx, store, opts)
			if err != nil {
				t.Fatal(err)
			}
			made := make([]bool, tc.n)
			if err := w.WriteInOrder(tc.n, order, func(i int) ([]any, error) {
				if made[i] {
					t.Fatalf("row %d made twice", i)
				}
				made[i] = true
				return tc.row(i), nil
			}); err != nil {
				t.Fatal(err)
			}
			if w.Rows() != int64(tc.n) {
				t.Fatalf("the writer counts %d rows, want %d", w.Rows(), tc.n)
			}
			inOrder, err := w.Close(ctx)
			if err != nil {
				t.Fatal(err)
			}
			md := pqMetadata(tc.opts.Schema, tc.opts.PartitionColumns, nil)
			want, got := pqRead(t, store, md, byRow, ReadOptions{}), pqRead(t, store, md, inOrder, ReadOptions{})
			if len(got) != len(want) || len(got) != tc.n {
				t.Fatalf("read %d rows, want %d", len(got), len(want))
			}
			for j := range want {
				if !pqEqual(got[j], want[j]) {
					t.Fatalf("row %d = %v, want %v", j, got[j], want[j])
				}
			}
			samePart := maps.EqualFunc(inOrder.PartitionValues, byRow.PartitionValues, func(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) })
			if inOrder.Stats != byRow.Stats || !samePart {
				t.Fatalf("stats %s %v, want %s %v", inOrder.Stats, inOrder.PartitionValues, byRow.Stats, byRow.PartitionValues)
			}
			if g, w := pqRowGroups(t, store, inOrder), pqRowGroups(t, store, byRow); !slices.Equal(g, w) {
				t.Fatalf("row groups of %v rows, want %v", g, w)
			}
		})
	}
	t.Run("a refused row", func(t *testing.T) {
		store := newPQMemStore()
		w, err := NewFileWriter(ctx, store, WriteOptions{Schema: flStagedSchema()})
		if err != nil {
			t.Fatal(err)
		}
		bad := errors.New("bad record")
		err = w.WriteInOrder(500, nil, func(i int) ([]any, error) {
			if i == 321 {
				return nil, bad
			}
			return flStagedRow(i), nil
		})
		if !errors.Is(err, bad) {
			t.Fatalf("WriteInOrder = %v, want %v", err, bad)
		}
		if err := w.Write(flStagedRow(0)); err == nil {
			t.Fatal("the file took a row after a failed WriteInOrder")
		}
		w.Abort()
		wrong := flStagedRow(7)
		wrong[0] = "not a number"
		w, err = NewFileWriter(ctx, store, WriteOptions{Schema: flStagedSchema()})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteInOrder(10, nil, func(i int) ([]any, error) {
			if i == 7 {
				return wrong, nil
			}
			return flStagedRow(i), nil
		}); !errors.Is(err, ErrValueType) {
			t.Fatalf("WriteInOrder of a wrong value = %v, want %v", err, ErrValueType)
		}
		w.Abort()
	})
}

// pqRowGroups returns the row counts of a data file's row groups.
func pqRowGroups(t *testing.T, store *pqMemStore, add Add) []int64 {
	t.Helper()
	name, err := add.ObjectName()
	if err != nil {
		t.Fatal(err)
	}
	data, err := objstore.ReadAll(context.Background(), store, name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, rg := range f.RowGroups() {
		out = append(out, rg.NumRows())
	}
	return out
}
