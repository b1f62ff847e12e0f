package delta

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dsdelta/dsdelta/shared/value"
)

func TestWriterStatsMatchSparkForTheSameRow(t *testing.T) {
	s := pqFixtureStore(t, "data-skipping-basic-stats-all-types")
	md, adds := pqReplay(t, s, -1)
	schema, err := value.ParseSchema(md.SchemaString)
	if err != nil {
		t.Fatal(err)
	}
	var spark string
	var rows [][]any
	for _, a := range adds {
		n := 0
		err := ReadFile(context.Background(), s, md, a, ReadOptions{}, func(r []any) error {
			rows = append(rows, r)
			n++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			spark = a.Stats
		}
	}
	if len(rows) != 1 || spark == "" {
		t.Fatalf("fixture has %d rows and stats %q", len(rows), spark)
	}
	add := pqWrite(t, newPQMemStore(), WriteOptions{Schema: schema}, rows)
	// Spark wrote the timestamp in its session zone (-08:00); we write the
	// same instant in UTC. Everything else is byte-identical.
	want := strings.ReplaceAll(spark, "2000-01-01T00:00:00.000-08:00", "2000-01-01T08:00:00.000Z")
	if add.Stats != want {
		t.Errorf("stats\n got %s\nwant %s", add.Stats, want)
	}

	t.Run("ParseStats reads Spark's stats into typed bounds", func(t *testing.T) {
		st, err := ParseStats(spark)
		if err != nil {
			t.Fatal(err)
		}
		if st.NumRecords != 1 {
			t.Errorf("numRecords = %d", st.NumRecords)
		}
		for _, tc := range []struct {
			col      string
			typ      value.Type
			min, max any
		}{
			{"as_int", value.Integer, int32(0), int32(0)},
			{"as_long", value.Long, int64(0), int64(0)},
			{"as_byte", value.Byte, int8(0), int8(0)},
			{"as_short", value.Short, int16(0), int16(0)},
			{"as_float", value.Float, float32(0), float32(0)},
			{"as_double", value.Double, 0.0, 0.0},
			{"as_string", value.String, "0", "0"},
			{"as_date", value.Date, value.Days(10957), value.Days(10957)},
			{"as_timestamp", value.Timestamp, value.Micros(946713600000000), value.Micros(946713600000999)},
			{"as_big_decimal", value.DecimalType{Precision: 1, Scale: 0}, pqDec("0"), pqDec("0")},
		} {
			lo, hi, ok := st.MinMax(tc.col, tc.typ)
			if !ok || !pqEqual(lo, tc.min) || !pqEqual(hi, tc.max) {
				t.Errorf("MinMax(%s) = %v, %v, %v; want %v, %v", tc.col, lo, hi, ok, tc.min, tc.max)
			}
			if n, ok := st.NullCountOf(tc.col); !ok || n != 0 {
				t.Errorf("NullCountOf(%s) = %d, %v", tc.col, n, ok)
			}
		}
		if _, _, ok := st.MinMax("missing", value.Long); ok {
			t.Error("MinMax of a column without stats reported ok")
		}
	})
}

func TestStatsAgreeWithABruteForceComputation(t *testing.T) {
	schema := value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.Long},
		{Name: "n", Type: value.Integer, Nullable: true},
		{Name: "x", Type: value.Double, Nullable: true},
		{Name: "s", Type: value.String, Nullable: true},
		{Name: "ts", Type: value.Timestamp, Nullable: true},
		{Name: "amt", Type: value.DecimalType{Precision: 10, Scale: 2}, Nullable: true},
		{Name: "st", Type: value.StructType{Fields: []value.Field{{Name: "a", Type: value.Short, Nullable: true}}}, Nullable: true},
		{Name: "arr", Type: value.ArrayType{Element: value.Long, ContainsNull: true}, Nullable: true},
		{Name: "flag", Type: value.Boolean, Nullable: true},
		{Name: "day", Type: value.Date, Nullable: true},
		{Name: "ntz", Type: value.TimestampNTZ, Nullable: true},
	}}
	// The same columns without the nested ones: a flat schema takes the
	// writer's and the stats' fast paths.
	flat := value.StructType{}
	var flatCols []int
	for i, f := range schema.Fields {
		if f.Name != "st" && f.Name != "arr" {
			flat.Fields = append(flat.Fields, f)
			flatCols = append(flatCols, i)
		}
	}
	for seed := range uint64(10) {
		schema, project := schema, func(r []any) []any { return r }
		if seed%2 == 1 {
			schema, project = flat, func(r []any) []any {
				out := make([]any, len(flatCols))
				for k, i := range flatCols {
					out[k] = r[i]
				}
				return out
			}
		}
		t.Run(fmt.Sprintf("random rows with seed %d, %d columns", seed, len(schema.Fields)), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			maybe := func(v any) any {
				if rng.IntN(4) == 0 {
					return nil
				}
				return v
			}
			var rows [][]any
			for range 200 + rng.IntN(200) {
				var st any
				if rng.IntN(5) > 0 {
					st = []any{maybe(int16(rng.IntN(2000) - 1000))}
				}
				rows = append(rows, project([]any{int64(rng.Int64N(1e6) - 5e5), maybe(int32(rng.Int32() - math.MaxInt32/2)), maybe(rng.NormFloat64() * 1e6),
					maybe(pqRandString(rng)), maybe(value.Micros(rng.Int64N(4e15) - 2e15)), maybe(value.Decimal{Unscaled: pqBig(rng.Int64N(2e9) - 1e9), Scale: 2}),
					st, maybe([]any{int64(1)}), maybe(true), maybe(value.Days(rng.Int32N(40000) - 20000)), maybe(value.LocalMicros(rng.Int64N(4e15) - 2e15))}))
			}
			add := pqWrite(t, newPQMemStore(), WriteOptions{Schema: schema}, rows)
			got, err := ParseStats(add.Stats)
			if err != nil {
				t.Fatal(err)
			}
			if got.NumRecords != int64(len(rows)) {
				t.Errorf("numRecords = %d, want %d", got.NumRecords, len(rows))
			}
			for c, f := range schema.Fields {
				var nulls int64
				var lo, hi any
				for _, r := range rows {
					v := r[c]
					if f.Name == "st" && v != nil {
						v = v.([]any)[0]
					}
					if v == nil {
						nulls++
						continue
					}
					if lo == nil || compareStat(v, lo) < 0 {
						lo = v
					}
					if hi == nil || compareStat(v, hi) > 0 {
						hi = v
					}
				}
				if f.Name == "st" {
					var nested struct {
						A int64 `json:"a"`
					}
					if err := json.Unmarshal(got.NullCount["st"], &nested); err != nil || nested.A != nulls {
						t.Errorf("nullCount.st.a = %s, want %d", got.NullCount["st"], nulls)
					}
					var mins struct {
						A int16 `json:"a"`
					}
					if err := json.Unmarshal(got.MinValues["st"], &mins); err != nil || mins.A != lo.(int16) {
						t.Errorf("minValues.st.a = %s, want %v", got.MinValues["st"], lo)
					}
					continue
				}
				if n, ok := got.NullCountOf(f.Name); !ok || n != nulls {
					t.Errorf("nullCount[%s] = %d, %v; want %d", f.Name, n, ok, nulls)
				}
				glo, ghi, ok := got.MinMax(f.Name, f.Type)
				switch f.Name {
				case "arr", "flag":
					if ok {
						t.Errorf("%s has min/max %v..%v; Spark collects none for its type", f.Name, glo, ghi)
					}
					continue
				case "ts":
					// Stats truncate to milliseconds; MinMax widens max by 999µs.
					lo = value.Micros(millisFloor(int64(lo.(value.Micros))))
					hi = value.Micros(millisFloor(int64(hi.(value.Micros))) + 999)
				case "ntz":
					lo = value.LocalMicros(millisFloor(int64(lo.(value.LocalMicros))))
					hi = value.LocalMicros(millisFloor(int64(hi.(value.LocalMicros))) + 999)
				case "s":
					lo = truncateMinString(lo.(string))
					hi, _ = truncateMaxString(hi.(string))
				}
				if !ok || !pqEqual(glo, lo) || !pqEqual(ghi, hi) {
					t.Errorf("MinMax(%s) = %v, %v, %v; want %v, %v", f.Name, glo, ghi, ok, lo, hi)
				}
			}
		})
	}
}

func pqRandString(rng *rand.Rand) string {
	alphabet := []rune("aZ09 é日本𝄞\u007f~")
	n := rng.IntN(45)
	var b strings.Builder
	for range n {
		b.WriteRune(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

func TestStatsOmitWhatJSONCannotHold(t *testing.T) {
	schema := value.StructType{Fields: []value.Field{
		{Name: "nan", Type: value.Double, Nullable: true},
		{Name: "inf", Type: value.Float, Nullable: true},
		{Name: "nulls", Type: value.Long, Nullable: true},
		{Name: "bin", Type: value.Binary, Nullable: true},
	}}
	rows := [][]any{
		{1.5, float32(math.Inf(1)), nil, []byte("a")},
		{math.NaN(), float32(-2), nil, nil},
	}
	add := pqWrite(t, newPQMemStore(), WriteOptions{Schema: schema}, rows)
	want := `{"numRecords":2,"minValues":{"nan":1.5,"inf":-2.0},"maxValues":{},"nullCount":{"nan":0,"inf":0,"nulls":2,"bin":1}}`
	if add.Stats != want {
		t.Errorf("stats\n got %s\nwant %s", add.Stats, want)
	}
}

func TestStatsCoverOnlyTheFirstIndexedLeafColumns(t *testing.T) {
	var fields []value.Field
	var row []any
	for i := range 40 {
		fields = append(fields, value.Field{Name: fmt.Sprintf("c%02d", i), Type: value.Integer, Nullable: true})
		row = append(row, int32(i))
	}
	// A struct of two leaves at the front counts as two columns.
	fields = append([]value.Field{{Name: "st", Type: value.StructType{Fields: []value.Field{{Name: "a", Type: value.Integer, Nullable: true}, {Name: "b", Type: value.Integer, Nullable: true}}}, Nullable: true}}, fields...)
	row = append([]any{[]any{int32(1), int32(2)}}, row...)
	schema := value.StructType{Fields: fields}
	for _, tc := range []struct {
		name    string
		limit   int
		columns int // top-level stats keys
	}{
		{"the default indexes 32 leaves", 0, 31},
		{"a limit of 3 stops inside the list", 3, 2},
		{"-1 indexes every column", -1, 41},
	} {
		t.Run(tc.name, func(t *testing.T) {
			add := pqWrite(t, newPQMemStore(), WriteOptions{Schema: schema, StatsColumns: tc.limit}, [][]any{row})
			st, err := ParseStats(add.Stats)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.NullCount) != tc.columns || len(st.MinValues) != tc.columns {
				t.Errorf("stats cover %d/%d columns, want %d: %s", len(st.NullCount), len(st.MinValues), tc.columns, add.Stats)
			}
		})
	}
}

func TestStringBoundsAreTruncatedLikeSpark(t *testing.T) {
	long := strings.Repeat("a", 40)
	tests := []struct {
		name  string
		in    string
		min   string
		max   string
		maxOK bool
	}{
		{"a short string is kept whole", "hello", "hello", "hello", true},
		{"exactly 32 units is kept whole", strings.Repeat("x", 32), strings.Repeat("x", 32), strings.Repeat("x", 32), true},
		{"an ASCII continuation gets the U+007F tie-breaker", long, long[:32], long[:32] + "\x7f", true},
		{"a non-ASCII continuation gets the U+10FFFF tie-breaker", strings.Repeat("b", 32) + "é", strings.Repeat("b", 32), strings.Repeat("b", 32) + "\U0010FFFF", true},
		{"a DEL continuation cannot use DEL", strings.Repeat("c", 32) + "\x7f", strings.Repeat("c", 32), strings.Repeat("c", 32) + "\U0010FFFF", true},
		{"a surrogate pair at the cut is not split", strings.Repeat("d", 31) + "𝄞𝄞", strings.Repeat("d", 31), strings.Repeat("d", 31) + "\U0010FFFF", true},
		{"U+10FFFF continuations extend the prefix", strings.Repeat("e", 32) + "\U0010FFFF" + "f", strings.Repeat("e", 32), strings.Repeat("e", 32) + "\U0010FFFF" + "\x7f", true},
		{"no safe prefix within 64 units drops max", strings.Repeat("e", 32) + strings.Repeat("\U0010FFFF", 20), strings.Repeat("e", 32), "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := truncateMinString(tc.in); got != tc.min {
				t.Errorf("min = %q, want %q", got, tc.min)
			}
			got, ok := truncateMaxString(tc.in)
			if got != tc.max || ok != tc.maxOK {
				t.Errorf("max = %q, %v; want %q, %v", got, ok, tc.max, tc.maxOK)
			}
			if ok && got < tc.in {
				t.Errorf("max %q sorts below the value %q", got, tc.in)
			}
			if !utf8.ValidString(got) {
				t.Errorf("max %q is not valid UTF-8", got)
			}
		})
	}
}

func TestJavaFloatFormatting(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		bits int
		want string
	}{
		{0, 64, "0.0"}, {1, 64, "1.0"}, {-2.5, 64, "-2.5"}, {0.001, 64, "0.001"}, {1e-4, 64, "1.0E-4"},
		{1234567, 64, "1234567.0"}, {1e7, 64, "1.0E7"}, {1.5e300, 64, "1.5E300"}, {float64(float32(0.1)), 32, "0.1"},
	} {
		if got := string(appendJavaFloat(nil, tc.f, tc.bits)); got != tc.want {
			t.Errorf("appendJavaFloat(%v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}

func TestParseStatsRejectsBrokenJSON(t *testing.T) {
	for _, s := range []string{"", "{", `{"numRecords":"x"}`} {
		if _, err := ParseStats(s); err == nil {
			t.Errorf("ParseStats(%q) succeeded", s)
		}
	}
	st, err := ParseStats(`{"numRecords":3,"minValues":{"d":1E-7},"maxValues":{"d":0.125}}`)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi, ok := st.MinMax("d", value.DecimalType{Precision: 5, Scale: 2})
	if !ok || !reflect.DeepEqual([]string{lo.(value.Decimal).String(), hi.(value.Decimal).String()}, []string{"0.00", "0.13"}) {
		t.Errorf("decimal bounds rounded outwards = %v, %v, %v; want 0.00, 0.13", lo, hi, ok)
	}
}

// FuzzParseStats feeds arbitrary add.stats strings (outside input from any
// writer's log) to the stats parser and the typed bound lookup.
func FuzzParseStats(f *testing.F) {
	f.Add(`{"numRecords":1,"minValues":{"a":1,"t":"2000-01-01T00:00:00.000-08:00"},"maxValues":{"a":2,"t":"x"},"nullCount":{"a":0}}`)
	f.Add(`{"numRecords":3,"minValues":{"a":1E-7},"maxValues":{"a":"1e400"}}`)
	f.Add(`{"numRecords":3,"minValues":{"a":1E-999999999},"maxValues":{"a":1e999999999}}`)
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ParseStats(s)
		if err != nil {
			return
		}
		for _, typ := range []value.Type{value.Long, value.Double, value.String, value.Date, value.Timestamp, value.DecimalType{Precision: 38, Scale: 4}} {
			st.MinMax("a", typ)
			st.MinMax("t", typ)
		}
		st.NullCountOf("a")
	})
}

func TestDecimalBoundsShowTheColumnScaleAndSurviveReuse(t *testing.T) {
	schema := value.StructType{Fields: []value.Field{{Name: "amt", Type: value.DecimalType{Precision: 10, Scale: 2}, Nullable: true}}}
	w, err := NewFileWriter(context.Background(), newPQMemStore(), WriteOptions{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	shared := pqDec("1.5")
	if err := w.Write([]any{shared}); err != nil {
		t.Fatal(err)
	}
	shared.Unscaled.SetInt64(999) // the caller reuses its big.Int
	if err := w.Write([]any{pqDec("-3")}); err != nil {
		t.Fatal(err)
	}
	add, err := w.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"numRecords":2,"minValues":{"amt":-3.00},"maxValues":{"amt":1.50},"nullCount":{"amt":0}}`; add.Stats != want {
		t.Errorf("stats = %s, want %s", add.Stats, want)
	}
}

// Delta stats hold the values themselves, as Spark writes them (its stats
// show 0.0 for a +0 value where the Parquet footer rule would write -0.0):
// a bound of -0 keeps its sign, and -0 and +0, equal as numbers, bound each
// other. Every path that makes stats agrees: rows written one by one, a row
// group re-encoded without a dropped row, and one copied verbatim.
func TestStatsKeepTheSignOfZero(t *testing.T) {
	negZero := math.Copysign(0, -1)
	schema := value.StructType{Fields: []value.Field{
		{Name: "id", Type: value.Long},
		{Name: "neg", Type: value.Float, Nullable: true},
		{Name: "both", Type: value.Double, Nullable: true},
	}}
	rows := [][]any{
		{int64(1), float32(negZero), negZero},
		{int64(2), float32(negZero), 0.0},
		{int64(3), float32(negZero), negZero},
	}
	checkStats := func(t *testing.T, stats string) {
		t.Helper()
		st, err := ParseStats(stats)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi, ok := st.MinMax("neg", value.Float)
		if !ok || !pqEqual(lo, float32(negZero)) || !pqEqual(hi, float32(negZero)) {
			t.Errorf("MinMax(neg) = %v, %v, %v; want -0, -0 in %s", lo, hi, ok, stats)
		}
		if n := strings.Count(stats, `"neg":-0.0,`); n != 2 {
			t.Errorf("stats %s write %d of neg's two bounds as -0.0", stats, n)
		}
		lo, hi, ok = st.MinMax("both", value.Double)
		if !ok || lo != 0.0 || hi != 0.0 {
			t.Errorf("MinMax(both) = %v, %v, %v; want zeros in %s", lo, hi, ok, stats)
		}
	}
	store := newPQMemStore()
	add := pqWrite(t, store, WriteOptions{Schema: schema}, rows)
	t.Run("rows written one by one", func(t *testing.T) { checkStats(t, add.Stats) })
	md := pqMetadata(schema, nil, nil)
	for _, tc := range []struct {
		name            string
		drop            int64
		copied, decoded int
	}{
		{"a row group re-encoded without a dropped row", 2, 0, 1},
		{"a row group copied verbatim", 0, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := RewriteFile(context.Background(), store, md, add, RewriteOptions{
				Write: WriteOptions{Schema: schema},
				Keys:  []string{"id"},
				Drop:  func(k []any) bool { return k[0].(int64) == tc.drop },
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Adds) != 1 || res.RowGroupsCopied != tc.copied || res.RowGroupsDecoded != tc.decoded {
				t.Fatalf("rewrite wrote %d files, copied %d row groups and decoded %d; want 1, %d and %d",
					len(res.Adds), res.RowGroupsCopied, res.RowGroupsDecoded, tc.copied, tc.decoded)
			}
			checkStats(t, res.Adds[0].Stats)
			for _, r := range pqRead(t, store, md, res.Adds[0], ReadOptions{}) {
				if !math.Signbit(float64(r[1].(float32))) {
					t.Errorf("row %v lost the sign of neg", r)
				}
			}
		})
	}
}

// millisFloor is the microsecond that begins the millisecond of x.
func millisFloor(x int64) int64 { return x - ((x%1000)+1000)%1000 }
