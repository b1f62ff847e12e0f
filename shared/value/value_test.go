package value

import (
	"math"
	"math/big"
	"testing"
	"time"
)

func TestDecimal(t *testing.T) {
	cases := []struct {
		in    string
		want  string
		scale int
	}{
		{"8888.00", "8888.00", 2},
		{"-0.05", "-0.05", 2},
		{"7", "7", 0},
		{"+12.340", "12.340", 3},
		{".5", "0.5", 1},
		{"123456789012345678901234567890.12345678", "123456789012345678901234567890.12345678", 8},
	}
	for _, c := range cases {
		t.Run("parses "+c.in+" keeping every digit", func(t *testing.T) {
			d, err := ParseDecimal(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if d.String() != c.want || d.Scale != c.scale {
				t.Fatalf("got %s scale %d, want %s scale %d", d, d.Scale, c.want, c.scale)
			}
		})
	}
	for _, bad := range []string{"", "-", "1e3", "1.2.3", "12a", "NaN"} {
		t.Run("rejects "+bad, func(t *testing.T) {
			if _, err := ParseDecimal(bad); err == nil {
				t.Fatalf("ParseDecimal(%q) succeeded", bad)
			}
		})
	}
	t.Run("rescale up keeps the value and down refuses to lose digits", func(t *testing.T) {
		d, _ := ParseDecimal("1.5")
		up, err := d.Rescale(3)
		if err != nil || up.String() != "1.500" {
			t.Fatalf("rescale up: %v %v", up, err)
		}
		if _, err := d.Rescale(0); err == nil {
			t.Fatal("rescale 1.5 to scale 0 should fail")
		}
		two, _ := ParseDecimal("2.00")
		if r, err := two.Rescale(0); err != nil || r.String() != "2" {
			t.Fatalf("rescale 2.00 to 0: %v %v", r, err)
		}
	})
	t.Run("compares across scales", func(t *testing.T) {
		a, _ := ParseDecimal("1.50")
		b, _ := ParseDecimal("1.5")
		c, _ := ParseDecimal("-2")
		if a.Cmp(b) != 0 || c.Cmp(a) != -1 || a.Cmp(c) != 1 {
			t.Fatal("wrong comparison")
		}
	})
	t.Run("small magnitudes pad with zeros", func(t *testing.T) {
		d := Decimal{Unscaled: big.NewInt(-5), Scale: 3}
		if d.String() != "-0.005" {
			t.Fatalf("got %s", d)
		}
	})
}

func TestTimes(t *testing.T) {
	ts := time.Date(1969, 12, 31, 23, 59, 59, 999_999_000, time.UTC)
	m := MicrosOf(ts)
	if m != -1 {
		t.Fatalf("micros of 1969-12-31T23:59:59.999999 = %d, want -1", m)
	}
	if got := m.String(); got != "1969-12-31T23:59:59.999999Z" {
		t.Fatalf("string %s", got)
	}
	if !m.Time().Equal(ts) {
		t.Fatalf("round trip %v", m.Time())
	}
	d := DaysOf(time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC))
	if d != -1 || d.String() != "1969-12-31" {
		t.Fatalf("days %d %s", d, d)
	}
	if LocalMicros(1_000_001).String() != "1970-01-01T00:00:01.000001" {
		t.Fatal(LocalMicros(1_000_001).String())
	}
}

func TestSchemaRoundTrip(t *testing.T) {
	const spark = `{"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":{}},{"name":"amount","type":"decimal(18,2)","nullable":true,"metadata":{}},{"name":"tags","type":{"type":"array","elementType":"string","containsNull":true},"nullable":true,"metadata":{}},{"name":"attrs","type":{"type":"map","keyType":"string","valueType":"integer","valueContainsNull":false},"nullable":true,"metadata":{"comment":"x"}},{"name":"addr","type":{"type":"struct","fields":[{"name":"zip","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}`
	st, err := ParseSchema(spark)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.SchemaString(); got != spark {
		t.Fatalf("round trip differs:\n got %s\nwant %s", got, spark)
	}
	if st.String() != "struct<id:long,amount:decimal(18,2),tags:array<string>,attrs:map<string,integer>,addr:struct<zip:string>>" {
		t.Fatal(st.String())
	}
	for _, bad := range []string{`{"type":"struct","fields":[{"name":"x","type":"uuid","nullable":true,"metadata":{}}]}`, `"long"`, `{"type":"struct","fields":[{"name":"x","type":"decimal(39,0)","nullable":true,"metadata":{}}]}`} {
		if _, err := ParseSchema(bad); err == nil {
			t.Errorf("ParseSchema(%s) succeeded", bad)
		}
	}
}

func TestAppendJSON(t *testing.T) {
	st := StructType{Fields: []Field{
		{Name: "i", Type: Long}, {Name: "d", Type: DecimalType{10, 2}}, {Name: "ts", Type: Timestamp},
		{Name: "day", Type: Date}, {Name: "b", Type: Binary}, {Name: "n", Type: String},
		{Name: "f", Type: Double}, {Name: "s", Type: StructType{Fields: []Field{{Name: "x", Type: Integer}}}},
		{Name: "a", Type: ArrayType{Element: Short}}, {Name: "m", Type: MapType{Key: Integer, Value: String}},
		{Name: "q", Type: String},
	}}
	row := []any{int64(-7), Decimal{Unscaled: big.NewInt(888800), Scale: 2}, Micros(1_700_000_000_000_001),
		Days(0), []byte{0, 1, 2}, nil, math.NaN(), []any{int32(3)}, []any{int16(1), nil},
		[]MapEntry{{Key: int32(1), Value: "one"}}, "quote\"and\nnewline\x01"}
	got, err := AppendRowJSON(nil, st, row)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"i":-7,"d":"8888.00","ts":"2023-11-14T22:13:20.000001Z","day":"1970-01-01","b":"AAEC","n":null,"f":"NaN","s":{"x":3},"a":[1,null],"m":{"1":"one"},"q":"quote\"and\nnewline\u0001"}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if _, err := AppendJSON(nil, Long, struct{}{}); err == nil {
		t.Fatal("unsupported value encoded without error")
	}
}

func TestADateIsItsQuotedTextInJSON(t *testing.T) {
	for d := Days(-800_000); d < 3_000_000; d += 997 {
		got, err := AppendJSON([]byte("x"), Date, d)
		if want := `x"` + d.String() + `"`; err != nil || string(got) != want {
			t.Fatalf("AppendJSON(%d) = %q, %v; want %q", d, got, err, want)
		}
	}
}

func TestPrecisionCountsTheDigitsOfTheUnscaledValue(t *testing.T) {
	for _, s := range []string{"0", "5", "-5", "9", "10", "-10", "99999", "100000", "9223372036854775807", "-9223372036854775808",
		"9223372036854775808", "-9223372036854775809", "123456789012345678901234567890"} {
		n, _ := new(big.Int).SetString(s, 10)
		want := len(new(big.Int).Abs(n).String())
		if got := (Decimal{Unscaled: n, Scale: 3}).Precision(); got != want {
			t.Errorf("Precision of %s = %d, want %d", s, got, want)
		}
	}
}

// Equal compares types by structure: a struct equals its copy and itself
// (its fields shared), and differs from one with a field changed or
// dropped, including when the two share a backing array.
func TestEqualComparesTypesByStructure(t *testing.T) {
	fields := []Field{{Name: "id", Type: Long}, {Name: "s", Type: StructType{Fields: []Field{{Name: "d", Type: DecimalType{Precision: 10, Scale: 2}, Nullable: true}}}, Nullable: true}}
	a := StructType{Fields: fields}
	same := StructType{Fields: fields}
	copied := StructType{Fields: append([]Field(nil), fields...)}
	shorter := StructType{Fields: fields[:1]}
	renamed := StructType{Fields: append([]Field(nil), fields...)}
	renamed.Fields[0].Name = "ID"
	nested := StructType{Fields: append([]Field(nil), fields...)}
	nested.Fields[1].Type = StructType{Fields: []Field{{Name: "d", Type: DecimalType{Precision: 11, Scale: 2}, Nullable: true}}}
	for _, c := range []struct {
		name string
		b    Type
		want bool
	}{
		{"itself, its fields shared", same, true},
		{"a copy", copied, true},
		{"its first field alone, on the same array", shorter, false},
		{"a field renamed", renamed, false},
		{"a nested type changed", nested, false},
		{"a primitive", Long, false},
	} {
		if got := Equal(a, c.b); got != c.want {
			t.Errorf("Equal(%v, %s) = %v, want %v", a, c.name, got, c.want)
		}
	}
}
