package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"reflect"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/parquetfile"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
)

// Expected contents follow each golden table's generator (see the
// fixtures' INDEX.md); they are built here from those generators, not from
// our reader's output.

func pqGenRows(n int, f func(i int) string) []string {
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, f(i))
	}
	return out
}

func TestReadFileReturnsTheGoldenTablesContents(t *testing.T) {
	cmRow := func(i int) string {
		return fmt.Sprintf(`{"ByteType":%[1]d,"ShortType":%[1]d,"IntegerType":%[1]d,"LongType":%[1]d,"FloatType":%[1]d,"DoubleType":%[1]d,"decimal":"%[1]d.00","BooleanType":%[2]t,"StringType":"%[1]d","BinaryType":"%[3]s","DateType":"2021-11-18","TimestampType":"1970-01-01T00:00:00.00%[1]d000Z",`+
			`"nested_struct":{"aa":"%[1]d","ac":{"aca":%[1]d}},"array_of_prims":[%[1]d,%[4]d],"array_of_arrays":[[%[1]d,%[4]d],[%[5]d,%[6]d]],"array_of_map_of_arrays":[{"%[1]d":[2,3],"%[4]d":[4,5]}],"array_of_structs":[{"ab":%[1]d},{"ab":%[1]d}],`+
			`"struct_of_arrays_maps_of_structs":{"aa":[%[1]d,%[4]d],"ab":{"[%[1]d,%[4]d]":{"aca":%[5]d}}},"map_of_prims":{"%[1]d":%[4]d,"%[5]d":%[6]d},"map_of_rows":{"%[4]d":{"ab":%[7]d}},"map_of_arrays":{"%[1]d":[%[1]d,null,%[4]d],"%[4]d":[]},"map_of_maps":{"%[1]d":{"%[1]d":%[1]d},"%[4]d":{"%[5]d":%[1]d}}}`,
			i, i%2 == 0, []string{"MA==", "MQ==", "Mg==", "Mw==", "NA=="}[i], i+1, i+2, i+3, i*20)
	}
	tests := []struct {
		name    string
		table   string
		version int
		want    []string
	}{
		{"a plain two-file table gives its ten rows", "snapshot-data0", -1, pqGenRows(10, func(i int) string {
			return fmt.Sprintf(`{"col1":%d,"col2":"data-0-%d"}`, i, i)
		})},
		{"every primitive type reads, including an all-null row", "data-reader-primitives", -1, append(pqGenRows(10, func(i int) string {
			return fmt.Sprintf(`{"as_int":%[1]d,"as_long":%[1]d,"as_byte":%[1]d,"as_short":%[1]d,"as_boolean":%[2]t,"as_float":%[1]d,"as_double":%[1]d,"as_string":"%[1]d","as_binary":"%[3]s","as_big_decimal":"%[1]d"}`,
				i, i%2 == 0, []string{"AAA=", "AQE=", "AgI=", "AwM=", "BAQ=", "BQU=", "BgY=", "Bwc=", "CAg=", "CQk="}[i])
		}), `{"as_int":null,"as_long":null,"as_byte":null,"as_short":null,"as_boolean":null,"as_float":null,"as_double":null,"as_string":null,"as_binary":null,"as_big_decimal":null}`)},
		{"partition values of twelve types and a null partition are parsed", "data-reader-partition-values", -1, append(pqGenRows(2, func(i int) string {
			return fmt.Sprintf(`{"as_int":%[1]d,"as_long":%[1]d,"as_byte":%[1]d,"as_short":%[1]d,"as_boolean":%[2]t,"as_float":%[1]d,"as_double":%[1]d,"as_string":"%[1]d","as_string_lit_null":"null","as_date":"2021-09-08","as_timestamp":"2021-09-08T11:11:11.000000Z","as_big_decimal":"%[1]d","as_list_of_records":[{"val":%[1]d},{"val":%[1]d},{"val":%[1]d}],"as_nested_struct":{"aa":"%[1]d","ab":"%[1]d","ac":{"aca":%[1]d,"acb":%[1]d}},"value":"%[1]d"}`, i, i%2 == 0)
		}), `{"as_int":null,"as_long":null,"as_byte":null,"as_short":null,"as_boolean":null,"as_float":null,"as_double":null,"as_string":null,"as_string_lit_null":null,"as_date":null,"as_timestamp":null,"as_big_decimal":null,"as_list_of_records":[{"val":2},{"val":2},{"val":2}],"as_nested_struct":{"aa":"2","ab":"2","ac":{"aca":2,"acb":2}},"value":"2"}`)},
		{"escaped partition directories resolve through the URI-encoded path", "data-reader-escaped-chars", -1, []string{
			`{"_1":"foo1","_2":"bar+%21"}`, `{"_1":"foo2","_2":"bar+%22"}`, `{"_1":"foo3","_2":"bar+%23"}`}},
		{"INT96 timestamps and dates read in UTC", "data-reader-date-types-UTC", -1, []string{
			`{"timestamp":"2020-01-01T08:09:10.000000Z","date":"2020-01-01"}`}},
		{"MICROS timestamps and timestamp partitions, before 1970 and null", "kernel-timestamp-TIMESTAMP_MICROS", -1, []string{
			`{"id":0,"part":"2020-01-01T08:09:10.001000Z","time":"2020-02-01T08:09:10.000000Z"}`,
			`{"id":1,"part":"2021-10-01T08:09:20.000000Z","time":"1999-01-01T09:00:00.000000Z"}`,
			`{"id":2,"part":"2021-10-01T08:09:20.000000Z","time":"2000-01-01T09:00:00.000000Z"}`,
			`{"id":3,"part":"1969-01-01T00:00:00.000000Z","time":"1969-01-01T00:00:00.000000Z"}`,
			`{"id":4,"part":null,"time":null}`}},
		{"structs nested in structs", "data-reader-nested-struct", -1, pqGenRows(10, func(i int) string {
			return fmt.Sprintf(`{"a":{"aa":"%[1]d","ab":"%[1]d","ac":{"aca":%[1]d,"acb":%[1]d}},"b":%[1]d}`, i)
		})},
		{"arrays of every primitive", "data-reader-array-primitives", -1, pqGenRows(10, func(i int) string {
			return fmt.Sprintf(`{"as_array_int":[%[1]d],"as_array_long":[%[1]d],"as_array_byte":[%[1]d],"as_array_short":[%[1]d],"as_array_boolean":[%[2]t],"as_array_float":[%[1]d],"as_array_double":[%[1]d],"as_array_string":["%[1]d"],"as_array_binary":["%[3]s"],"as_array_big_decimal":["%[1]d"]}`,
				i, i%2 == 0, []string{"AAA=", "AQE=", "AgI=", "AwM=", "BAQ=", "BQU=", "BgY=", "Bwc=", "CAg=", "CQk="}[i])
		})},
		{"maps with primitive keys and decimal and array-of-struct values", "data-reader-map", -1, pqGenRows(10, func(i int) string {
			return fmt.Sprintf(`{"i":%[1]d,"a":{"%[1]d":%[1]d},"b":{"%[1]d":%[1]d},"c":{"%[1]d":%[2]t},"d":{"%[1]d":%[1]d},"e":{"%[1]d":"%[1]d"},"f":{"%[1]d":[{"val":%[1]d},{"val":%[1]d},{"val":%[1]d}]}}`, i, i%2 == 0)
		})},
		{"column mapping by name reads physical columns of every shape", "table-with-columnmapping-mode-name", -1, append(pqGenRows(5, cmRow),
			`{"ByteType":null,"ShortType":null,"IntegerType":null,"LongType":null,"FloatType":null,"DoubleType":null,"decimal":null,"BooleanType":null,"StringType":null,"BinaryType":null,"DateType":null,"TimestampType":null,"nested_struct":null,"array_of_prims":null,"array_of_arrays":null,"array_of_map_of_arrays":null,"array_of_structs":null,"struct_of_arrays_maps_of_structs":null,"map_of_prims":null,"map_of_rows":null,"map_of_arrays":null,"map_of_maps":null}`)},
		{"a deletion vector hides the deleted ids", "basic-dv-no-checkpoint", -1, pqGenRows(8, func(i int) string {
			return fmt.Sprintf(`{"id":%d}`, i+2)
		})},
		{"the stats table's single row", "data-skipping-basic-stats-all-types", -1, []string{
			`{"as_int":0,"as_long":0,"as_byte":0,"as_short":0,"as_float":0,"as_double":0,"as_string":"0","as_date":"2000-01-01","as_timestamp":"2000-01-01T08:00:00.000000Z","as_big_decimal":"0"}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := pqFixtureStore(t, tc.table)
			st, rows := pqReadTable(t, s, tc.version, ReadOptions{})
			got := pqRowsJSON(t, st, rows)
			want := append([]string(nil), tc.want...)
			pqSortStrings(want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("rows differ\n got: %s\nwant: %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
			}
		})
	}
}

func pqSortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestReadFileUsesTheGoRepresentationOfEachType(t *testing.T) {
	s := pqFixtureStore(t, "data-reader-primitives")
	_, rows := pqReadTable(t, s, -1, ReadOptions{})
	var row7 []any
	for _, r := range rows {
		if r[0] == int32(7) {
			row7 = r
		}
	}
	want := []any{int32(7), int64(7), int8(7), int16(7), false, float32(7), float64(7), "7", []byte{7, 7}, value.Decimal{Unscaled: big.NewInt(7), Scale: 0}}
	if !pqEqual(row7, want) {
		t.Errorf("row 7 = %#v, want %#v", row7, want)
	}
}

func TestReadFileReturnsDecimalsOfEveryPhysicalEncoding(t *testing.T) {
	s := pqFixtureStore(t, "decimal-various-scale-precision")
	_, rows := pqReadTable(t, s, -1, ReadOptions{Columns: []string{"decimal_4_0", "decimal_12_6", "decimal_25_18", "decimal_38_36", "decimal_7_6"}})
	if len(rows) != 3 {
		t.Fatalf("got %d rows, want 3", len(rows))
	}
	// The positive row (seed 27) as Spark reads it: INT32, INT64 and
	// FIXED_LEN_BYTE_ARRAY(11/16) encodings; decimal(7,6) overflowed to null.
	var pos []any
	for _, r := range rows {
		if d, ok := r[0].(value.Decimal); ok && d.Unscaled.Sign() > 0 {
			pos = r
		}
	}
	want := []string{"4", "0.000062", "234942.000000000000000000", "0.000000000000000003241836000000000000"}
	for i, w := range want {
		d, ok := pos[i].(value.Decimal)
		if !ok || d.String() != w {
			t.Errorf("column %d = %v, want %s", i, pos[i], w)
		}
	}
	if pos[4] != nil {
		t.Errorf("decimal_7_6 = %v, want null", pos[4])
	}
	if d := pos[3].(value.Decimal); d.Scale != 36 {
		t.Errorf("decimal_38_36 scale = %d, want 36", d.Scale)
	}
}

// pqDVPrefixStore serves the DV file of table-with-dv-small under the name
// the protocol gives it: Spark's test suite wrote it with a test-only file
// name prefix ("test%dv%prefix-") that no reader outside that suite adds.
type pqDVPrefixStore struct{ *pqMemStore }

func (s pqDVPrefixStore) NewReader(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	if strings.HasPrefix(name, "deletion_vector_") {
		name = "test%dv%prefix-" + name
	}
	return s.pqMemStore.NewReader(ctx, name, off, n)
}

func TestReadFileAppliesADeletionVectorStoredInAFile(t *testing.T) {
	mem := pqFixtureStore(t, "table-with-dv-small")
	store := pqDVPrefixStore{mem}
	for _, tc := range []struct {
		name    string
		version int
		want    []int32
	}{
		{"version 0 has all ten values", 0, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"version 1 drops rows 0 and 9 through the DV", 1, []int32{1, 2, 3, 4, 5, 6, 7, 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md, adds := pqReplay(t, mem, tc.version)
			var got []int32
			for _, a := range adds {
				err := ReadFile(context.Background(), store, md, a, ReadOptions{}, func(row []any) error {
					got = append(got, row[0].(int32))
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("values = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReadFileProjectsColumnsInTheRequestedOrder(t *testing.T) {
	s := pqFixtureStore(t, "data-reader-partition-values")
	_, rows := pqReadTable(t, s, -1, ReadOptions{Columns: []string{"value", "as_int", "as_nested_struct"}})
	var got []string
	for _, r := range rows {
		got = append(got, strings.TrimSpace(fmt.Sprintln(r...)))
	}
	pqSortStrings(got)
	want := []string{"0 0 [0 0 [0 0]]", "1 1 [1 1 [1 1]]", "2 <nil> [2 2 [2 2]]"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("projected rows = %q, want %q", got, want)
	}
}

func TestReadFileRejectsAnUnknownColumn(t *testing.T) {
	s := pqFixtureStore(t, "snapshot-data0")
	md, adds := pqReplay(t, s, -1)
	err := ReadFile(context.Background(), s, md, adds[0], ReadOptions{Columns: []string{"nope"}}, func([]any) error { return nil })
	if !errors.Is(err, ErrUnknownColumn) {
		t.Errorf("err = %v, want ErrUnknownColumn", err)
	}
}

func TestReadFileStopsWithTheCallbackError(t *testing.T) {
	s := pqFixtureStore(t, "snapshot-data0")
	md, adds := pqReplay(t, s, -1)
	stop := errors.New("stop")
	calls := 0
	err := ReadFile(context.Background(), s, md, adds[0], ReadOptions{}, func([]any) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("err = %v after %d calls, want stop after 1", err, calls)
	}
}

func TestReadFileReportsAMissingObject(t *testing.T) {
	s := pqFixtureStore(t, "snapshot-data0")
	md, adds := pqReplay(t, s, -1)
	a := adds[0]
	a.Path = "gone.parquet"
	a.Size = 0
	err := ReadFile(context.Background(), s, md, a, ReadOptions{}, func([]any) error { return nil })
	if !errors.Is(err, objstore.ErrNotExist) {
		t.Errorf("err = %v, want ErrNotExist", err)
	}
}

func BenchmarkReadFile(b *testing.B) {
	store := newPQMemStore()
	ctx := context.Background()
	add := pqCDCFile(b, store, WriteOptions{}, pqBenchRows)
	md := pqMetadata(pqCDCSchema(), nil, nil)
	for _, tc := range []struct {
		name string
		cols []string
	}{{"all columns", nil}, {"key columns", []string{"id", "_ds_order"}}} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				n := 0
				err := ReadFile(ctx, store, md, add, ReadOptions{Columns: tc.cols}, func([]any) error { n++; return nil })
				if err != nil || n != pqBenchRows {
					b.Fatalf("read %d rows: %v", n, err)
				}
			}
			b.ReportMetric(float64(pqBenchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// pqListGroup is a LIST-annotated group with arbitrary children, to build
// the legacy list layouts other writers produce.
type pqListGroup struct{ *parquetfile.Group }

func (pqListGroup) Type() parquet.Type { return parquet.List(parquet.Int(32)).Type() }

func TestReadFileDecodesEncodingsOtherWritersChoose(t *testing.T) {
	field := func(name string, n parquet.Node) parquet.Field { return parquetfile.NamedField(name, n) }
	root := parquetfile.NewGroup(
		field("ts_millis", parquet.Optional(parquet.Timestamp(parquet.Millisecond))),
		field("ts_nanos", parquet.Optional(parquet.TimestampAdjusted(parquet.Nanosecond, false))),
		field("ts_int96", parquet.Optional(parquet.Leaf(parquet.Int96Type))),
		field("dec_ba", parquet.Optional(parquet.Decimal(2, 20, parquet.ByteArrayType))),
		field("b8", parquet.Optional(parquet.Int(8))),
		// Legacy two-level list whose repeated field is the element.
		field("tags", parquet.Optional(pqListGroup{parquetfile.NewGroup(field("array", parquet.Repeated(parquet.Leaf(parquet.Int32Type))))})),
		// Legacy list of one-field structs named <list>_tuple.
		field("pairs", parquet.Optional(pqListGroup{parquetfile.NewGroup(field("pairs_tuple", parquet.Repeated(parquetfile.NewGroup(field("a", parquet.Required(parquet.Leaf(parquet.Int32Type)))))))})),
		// A bare repeated field without LIST annotation.
		field("nums", parquet.Repeated(parquet.Leaf(parquet.Int32Type))),
		// A two-level list of structs whose repeated group holds the field.
		field("recs", parquet.Optional(pqListGroup{parquetfile.NewGroup(field("list", parquet.Repeated(parquetfile.NewGroup(field("val", parquet.Optional(parquet.Leaf(parquet.Int32Type)))))))})),
	)
	var buf bytes.Buffer
	w := parquet.NewWriter(&buf, parquet.NewSchema("legacy", root))
	rows := []parquet.Row{
		{
			parquet.Int64Value(1000).Level(0, 1, 0),
			parquet.Int64Value(-1500).Level(0, 1, 1),
			parquet.Int96Value(deprecated.Int96{1000, 0, 2451545}).Level(0, 1, 2),
			parquet.ByteArrayValue([]byte{0xCF, 0xC7}).Level(0, 1, 3),
			parquet.Int32Value(-5).Level(0, 1, 4),
			parquet.Int32Value(1).Level(0, 2, 5), parquet.Int32Value(2).Level(1, 2, 5),
			parquet.Int32Value(7).Level(0, 2, 6),
			parquet.Int32Value(9).Level(0, 1, 7), parquet.Int32Value(8).Level(1, 1, 7),
			parquet.Int32Value(3).Level(0, 3, 8), parquet.NullValue().Level(1, 2, 8),
		},
		{
			parquet.NullValue().Level(0, 0, 0), parquet.NullValue().Level(0, 0, 1), parquet.NullValue().Level(0, 0, 2),
			parquet.NullValue().Level(0, 0, 3), parquet.NullValue().Level(0, 0, 4),
			parquet.NullValue().Level(0, 1, 5), // empty list
			parquet.NullValue().Level(0, 0, 6), // null list
			parquet.NullValue().Level(0, 0, 7), // empty repeated field
			parquet.NullValue().Level(0, 0, 8), // null list
		},
	}
	if _, err := w.WriteRows(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := parquet.OpenFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for _, frag := range []string{"group tags (LIST)", "repeated int32 array", "repeated group pairs_tuple", "repeated int32 nums", "int96 ts_int96", "binary dec_ba (DECIMAL(20,2))", "unit=NANOS", "unit=MILLIS"} {
		if !strings.Contains(f.Schema().String(), frag) {
			t.Fatalf("test file schema lacks %q:\n%s", frag, f.Schema())
		}
	}
	store := newPQMemStore()
	store.objects["legacy.parquet"] = buf.Bytes()
	schema := value.StructType{Fields: []value.Field{
		{Name: "ts_millis", Type: value.Timestamp, Nullable: true},
		{Name: "ts_nanos", Type: value.TimestampNTZ, Nullable: true},
		{Name: "ts_int96", Type: value.Timestamp, Nullable: true},
		{Name: "dec_ba", Type: value.DecimalType{Precision: 20, Scale: 2}, Nullable: true},
		{Name: "b8", Type: value.Byte, Nullable: true},
		{Name: "tags", Type: value.ArrayType{Element: value.Integer}, Nullable: true},
		{Name: "pairs", Type: value.ArrayType{Element: value.StructType{Fields: []value.Field{{Name: "a", Type: value.Integer}}}}, Nullable: true},
		{Name: "nums", Type: value.ArrayType{Element: value.Integer}, Nullable: true},
		{Name: "recs", Type: value.ArrayType{Element: value.StructType{Fields: []value.Field{{Name: "val", Type: value.Integer, Nullable: true}}}}, Nullable: true},
		{Name: "not_in_file", Type: value.Long, Nullable: true},
	}}
	add := Add{Path: "legacy.parquet", Size: int64(buf.Len())}
	got := pqRead(t, store, pqMetadata(schema, nil, nil), add, ReadOptions{})
	want := [][]any{
		{value.Micros(1_000_000), value.LocalMicros(-2), value.Micros(946684800000001), pqDec("-123.45"), int8(-5), []any{int32(1), int32(2)}, []any{[]any{int32(7)}}, []any{int32(9), int32(8)}, []any{[]any{int32(3)}, []any{nil}}, nil},
		{nil, nil, nil, nil, nil, []any{}, nil, []any{}, nil, nil},
	}
	if len(got) != len(want) {
		t.Fatalf("read %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if !pqEqual(got[i], want[i]) {
			t.Errorf("row %d:\n got %#v\nwant %#v", i, got[i], want[i])
		}
	}
}
