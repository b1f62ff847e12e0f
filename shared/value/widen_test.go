package value

import (
	"math/big"
	"testing"
)

func TestWidenAndConvert(t *testing.T) {
	cases := []struct {
		a, b Type
		want string
	}{
		{Integer, Long, "long"},
		{Long, Short, "long"},
		{Long, DecimalType{38, 2}, "decimal(38,2)"},
		{DecimalType{10, 2}, DecimalType{12, 4}, "decimal(12,4)"},
		{DecimalType{38, 1}, DecimalType{38, 2}, "decimal(38,2)"},
		{Integer, DecimalType{5, 2}, "decimal(12,2)"},
		{Float, Double, "double"},
		{Integer, Double, "double"},
		{Date, TimestampNTZ, "timestamp_ntz"},
	}
	for _, c := range cases {
		t.Run(c.a.String()+" and "+c.b.String()+" widen to "+c.want, func(t *testing.T) {
			for _, pair := range [][2]Type{{c.a, c.b}, {c.b, c.a}} {
				got, ok := Widen(pair[0], pair[1])
				if !ok || got.String() != c.want {
					t.Fatalf("Widen(%s, %s) = %v, %v", pair[0], pair[1], got, ok)
				}
			}
		})
	}
	for _, bad := range [][2]Type{{Long, String}, {Boolean, Integer}, {Long, Double}, {Timestamp, Date}, {Binary, String}} {
		if _, ok := Widen(bad[0], bad[1]); ok {
			t.Errorf("Widen(%s, %s) should fail", bad[0], bad[1])
		}
	}
	t.Run("conversions are exact or refused", func(t *testing.T) {
		d, err := Convert(int64(12), Long, DecimalType{38, 2})
		if err != nil || d.(Decimal).String() != "12.00" {
			t.Fatal(d, err)
		}
		d, err = Convert(Decimal{big.NewInt(125), 1}, DecimalType{38, 1}, DecimalType{38, 2})
		if err != nil || d.(Decimal).String() != "12.50" {
			t.Fatal(d, err)
		}
		if _, err := Convert(Decimal{big.NewInt(125), 2}, DecimalType{10, 2}, DecimalType{10, 1}); err == nil {
			t.Fatal("losing a digit must fail")
		}
		if _, err := Convert(int64(1<<40), Long, Integer); err == nil {
			t.Fatal("out of range must fail")
		}
		if v, err := Convert(int32(7), Integer, Long); err != nil || v != int64(7) {
			t.Fatal(v, err)
		}
		if v, err := Convert(Days(1), Date, TimestampNTZ); err != nil || v != LocalMicros(86400*1_000_000) {
			t.Fatal(v, err)
		}
	})
}

func TestParseIntegerGivesEachIntegerTypeItsGoTypeAndRange(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    Primitive
		text string
		want any
		err  bool
	}{
		{"a byte is an int8", Byte, "-128", int8(-128), false},
		{"a byte past its range is an error", Byte, "128", nil, true},
		{"a short is an int16", Short, "32767", int16(32767), false},
		{"an integer is an int32", Integer, "-2147483648", int32(-2147483648), false},
		{"an integer past its range is an error", Integer, "2147483648", nil, true},
		{"a long is an int64", Long, "9223372036854775807", int64(9223372036854775807), false},
		{"text that is not a number is an error", Long, "12a", nil, true},
		{"a type that is not an integer is an error", Double, "1", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseInteger(tc.t, tc.text)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("ParseInteger(%s, %q) = %#v, %v; want %#v, error %v", tc.t, tc.text, got, err, tc.want, tc.err)
			}
		})
	}
}
