package delta

import (
	"testing"

	"github.com/dsdelta/dsdelta/shared/value"
)

func pqStrp(s string) *string { return &s }

func TestPartitionValuesRoundTripThroughTheirText(t *testing.T) {
	tests := []struct {
		name string
		typ  value.Type
		v    any
		text string
	}{
		{"a string stays as is", value.String, "a b/c:d", "a b/c:d"},
		{"a byte", value.Byte, int8(-7), "-7"},
		{"a short", value.Short, int16(300), "300"},
		{"an integer", value.Integer, int32(-2147483648), "-2147483648"},
		{"a long", value.Long, int64(9007199254740993), "9007199254740993"},
		{"a float in Java form", value.Float, float32(1), "1.0"},
		{"a double in Java form", value.Double, 0.5, "0.5"},
		{"a boolean", value.Boolean, true, "true"},
		{"a decimal keeps its scale", value.DecimalType{Precision: 5, Scale: 2}, pqDec("-1.50"), "-1.50"},
		{"a date", value.Date, value.Days(18878), "2021-09-08"},
		{"a timestamp in ISO-8601 UTC", value.Timestamp, value.Micros(1631099471000001), "2021-09-08T11:11:11.000001Z"},
		{"a timestamp before 1970", value.Timestamp, value.Micros(-1), "1969-12-31T23:59:59.999999Z"},
		{"a timestamp_ntz without zone", value.TimestampNTZ, value.LocalMicros(1631099471000000), "2021-09-08 11:11:11.000000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FormatPartitionValue(tc.typ, tc.v)
			if err != nil || got == nil || *got != tc.text {
				t.Fatalf("FormatPartitionValue = %v, %v; want %q", got, err, tc.text)
			}
			back, err := ParsePartitionValue(tc.typ, got)
			if err != nil || !pqEqual(back, tc.v) {
				t.Errorf("ParsePartitionValue(%q) = %#v, %v; want %#v", *got, back, err, tc.v)
			}
		})
	}
}

func TestPartitionValueParsingAcceptsWhatOtherWritersWrite(t *testing.T) {
	tests := []struct {
		name string
		typ  value.Type
		text *string
		want any
	}{
		{"JSON null is null", value.Integer, nil, nil},
		{"an empty string is null for a number", value.Integer, pqStrp(""), nil},
		{"an empty string stays empty for a string", value.String, pqStrp(""), ""},
		{"Spark's timestamp without zone reads as UTC", value.Timestamp, pqStrp("2021-09-08 11:11:11"), value.Micros(1631099471000000)},
		{"fractional seconds without zone", value.Timestamp, pqStrp("2020-01-01 08:09:10.001"), value.Micros(1577866150001000)},
		{"ISO-8601 with an offset converts to UTC", value.Timestamp, pqStrp("2021-09-08T13:11:11+02:00"), value.Micros(1631099471000000)},
		{"a timestamp_ntz keeps the wall clock of a zoned text", value.TimestampNTZ, pqStrp("2021-09-08T11:11:11+02:00"), value.LocalMicros(1631099471000000)},
		{"a float written as 0.0", value.Float, pqStrp("0.0"), float32(0)},
		{"NaN", value.Double, pqStrp("NaN"), nil},
		{"a short decimal text gains the column scale", value.DecimalType{Precision: 4, Scale: 2}, pqStrp("3"), pqDec("3.00")},
		{"an upper-case boolean", value.Boolean, pqStrp("FALSE"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePartitionValue(tc.typ, tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "NaN" {
				if f, ok := got.(float64); !ok || f == f {
					t.Errorf("got %v, want NaN", got)
				}
				return
			}
			if !pqEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
	for _, bad := range []struct {
		typ  value.Type
		text string
	}{{value.Integer, "x"}, {value.Byte, "300"}, {value.Date, "2021-13-01"}, {value.DecimalType{Precision: 3, Scale: 0}, "1.5"}, {value.Timestamp, "yesterday"}} {
		if _, err := ParsePartitionValue(bad.typ, pqStrp(bad.text)); err == nil {
			t.Errorf("ParsePartitionValue(%v, %q) succeeded", bad.typ, bad.text)
		}
	}
}

func TestPartitionPathsAreEscapedLikeSparks(t *testing.T) {
	// Spark's data-reader-partition-values and escaped-chars golden tables.
	dir := partitionDir([]string{"as_timestamp", "_2"}, map[string]*string{"as_timestamp": pqStrp("2021-09-08 11:11:11"), "_2": pqStrp("bar+%21")})
	if want := "as_timestamp=2021-09-08 11%3A11%3A11/_2=bar+%2521"; dir != want {
		t.Errorf("partitionDir = %q, want %q", dir, want)
	}
	if got, want := encodeAddPath(dir+"/part-0.parquet"), "as_timestamp=2021-09-08%2011%253A11%253A11/_2=bar+%252521/part-0.parquet"; got != want {
		t.Errorf("encodeAddPath = %q, want %q", got, want)
	}
	if got := partitionDir([]string{"a"}, map[string]*string{"a": nil}); got != "a=__HIVE_DEFAULT_PARTITION__" {
		t.Errorf("null partition dir = %q", got)
	}
	name, err := decodeAddPath("as_timestamp=2021-09-08%2011%253A11%253A11/_2=bar+%252521/x.parquet")
	if err != nil || name != "as_timestamp=2021-09-08 11%3A11%3A11/_2=bar+%2521/x.parquet" {
		t.Errorf("decodeAddPath = %q, %v", name, err)
	}
	if _, err := decodeAddPath("gs://bucket/t/x.parquet"); err == nil {
		t.Error("decodeAddPath accepted an absolute URI")
	}
}

// FuzzParsePartitionValue checks that any partition value text either
// parses or fails cleanly, and that what parses formats back to a value
// that parses to the same thing.
func FuzzParsePartitionValue(f *testing.F) {
	for _, s := range []string{"", "0", "-1.50", "2021-09-08 11:11:11", "2021-09-08T11:11:11.000001Z", "true", "NaN"} {
		f.Add(s)
	}
	types := []value.Type{value.Integer, value.Long, value.Double, value.Boolean, value.Date, value.Timestamp, value.TimestampNTZ, value.DecimalType{Precision: 10, Scale: 2}}
	f.Fuzz(func(t *testing.T, s string) {
		for _, typ := range types {
			v, err := ParsePartitionValue(typ, &s)
			if err != nil || v == nil {
				continue
			}
			text, err := FormatPartitionValue(typ, v)
			if err != nil {
				t.Fatalf("%v %q: parsed %#v but cannot format it: %v", typ, s, v, err)
			}
			back, err := ParsePartitionValue(typ, text)
			if err != nil || !pqEqual(back, v) {
				t.Fatalf("%v %q: %#v formats as %q which parses as %#v, %v", typ, s, v, *text, back, err)
			}
		}
	})
}
