package cdc

import (
	"bytes"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/dsdelta/dsdelta/shared/value"
)

// randomScalar returns a value of the Go type of kind, drawn to hit edges:
// extremes, zero, signs, strings with NUL bytes and common prefixes.
func randomScalar(rng *rand.Rand, kind int) any {
	if rng.IntN(12) == 0 {
		return nil
	}
	edge := func(vals ...int64) int64 {
		if rng.IntN(3) == 0 {
			return vals[rng.IntN(len(vals))]
		}
		return rng.Int64N(2001) - 1000
	}
	switch kind {
	case 0:
		return rng.IntN(2) == 0
	case 1:
		return int8(edge(math.MinInt8, math.MaxInt8, 0, -1))
	case 2:
		return int16(edge(math.MinInt16, math.MaxInt16, 0, -1))
	case 3:
		return int32(edge(math.MinInt32, math.MaxInt32, 0, -1))
	case 4:
		return edge(math.MinInt64, math.MaxInt64, 0, -1)
	case 5:
		return value.Days(edge(math.MinInt32, math.MaxInt32, 0))
	case 6:
		return value.Micros(edge(math.MinInt64, math.MaxInt64, 0))
	case 7:
		return value.LocalMicros(edge(math.MinInt64, 0, 1))
	case 8:
		return []float64{math.Inf(-1), math.Inf(1), -1.5, 0, 2.25, 1e300, -1e-300, math.MaxFloat64}[rng.IntN(8)]
	case 9:
		return []float32{float32(math.Inf(-1)), -3, 0, 0.5, math.MaxFloat32, -math.SmallestNonzeroFloat32}[rng.IntN(6)]
	case 10, 11:
		alphabet := []string{"", "a", "b", "\x00", "\xff", "é", "ab", "\x00\x01"}
		var s string
		for n := rng.IntN(4); n > 0; n-- {
			s += alphabet[rng.IntN(len(alphabet))]
		}
		if kind == 11 {
			return []byte(s)
		}
		return s
	default:
		u := new(big.Int).Lsh(big.NewInt(edge(0, 1, -1, math.MaxInt64, math.MinInt64)), uint(rng.IntN(3)*40))
		return value.Decimal{Unscaled: u, Scale: 2}
	}
}

func TestValueCodesSortAsKeysCompare(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for kind := 0; kind <= 12; kind++ {
		kind2 := rng.IntN(13)
		for range 2000 {
			a := []any{randomScalar(rng, kind), randomScalar(rng, kind2)}
			b := []any{randomScalar(rng, kind), randomScalar(rng, kind2)}
			if rng.IntN(3) == 0 {
				b[0] = a[0]
			}
			ca, err := appendCodes(nil, a, codeKey)
			if err != nil {
				t.Fatal(err)
			}
			cb, err := appendCodes(nil, b, codeKey)
			if err != nil {
				t.Fatal(err)
			}
			want := value.CompareKeys(a, b)
			got := bytes.Compare(ca, cb)
			if want != 0 && got != want {
				t.Fatalf("keys %#v and %#v: codes compare %d, CompareKeys %d", a, b, got, want)
			}
			if want == 0 && got != 0 && KeyText(a) == KeyText(b) {
				t.Fatalf("keys %#v and %#v have the same text but not the same code", a, b)
			}
		}
	}
}

func TestValueCodesRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	nested := func() any {
		switch rng.IntN(3) {
		case 0:
			return []any{randomScalar(rng, rng.IntN(13)), []any{randomScalar(rng, 10)}}
		case 1:
			return []value.MapEntry{{Key: "k", Value: randomScalar(rng, 4)}, {Key: "\x00", Value: nil}}
		}
		return randomScalar(rng, rng.IntN(13))
	}
	for range 5000 {
		row := []any{nested(), nested(), nested()}
		code, err := appendCodes(nil, row, codeExact)
		if err != nil {
			t.Fatal(err)
		}
		got, rest, err := readCodes(nil, code, len(row))
		if err != nil || len(rest) != 0 {
			t.Fatalf("decode %#v: %v (%d bytes left)", row, err, len(rest))
		}
		for i := range row {
			if !value.EqualValues(got[i], row[i]) || reflect.TypeOf(got[i]) != reflect.TypeOf(row[i]) {
				t.Fatalf("column %d: decoded %#v, want %#v", i, got[i], row[i])
			}
		}
	}
	t.Run("every bit of a float survives the exact code", func(t *testing.T) {
		for _, f := range []float64{math.Copysign(0, -1), math.Float64frombits(0x7ff8000000000001)} {
			code, _ := appendCode(nil, f, codeExact)
			got, _, err := readCode(code)
			if err != nil || math.Float64bits(got.(float64)) != math.Float64bits(f) {
				t.Fatalf("%x decoded as %v (%v)", math.Float64bits(f), got, err)
			}
		}
	})
}

// TestEqualCodesAreEqualValues: two rows have the same codeEqual code
// exactly when value.EqualValues holds every column equal, which is what
// lets Verify compare row hashes instead of rows.
func TestEqualCodesAreEqualValues(t *testing.T) {
	negZero := math.Copysign(0, -1)
	pairs := []struct {
		name string
		a, b any
		want bool
	}{
		{"-0 equals +0", negZero, 0.0, true},
		{"float32 -0 equals +0", float32(negZero), float32(0), true},
		{"NaNs are equal", math.NaN(), math.Float64frombits(0x7ff8000000000001), true},
		{"decimals of another scale differ", value.Decimal{Unscaled: big.NewInt(10), Scale: 1}, value.Decimal{Unscaled: big.NewInt(100), Scale: 2}, false},
		{"equal decimals are equal", value.Decimal{Unscaled: big.NewInt(-7), Scale: 2}, value.Decimal{Unscaled: big.NewInt(-7), Scale: 2}, true},
		{"an int32 is not an int64", int32(1), int64(1), false},
		{"a timestamp is not a long", value.Micros(5), int64(5), false},
		{"a string is not binary", "x", []byte("x"), false},
		{"null is not an empty list", nil, []any{}, false},
		{"empty lists are equal", []any{}, []any(nil), true},
		{"a list is not a longer one", []any{"a"}, []any{"a", nil}, false},
		{"strings split differently differ", []any{"ab", "c"}, []any{"a", "bc"}, false},
		{"maps compare entries in order", []value.MapEntry{{Key: "a", Value: int32(1)}}, []value.MapEntry{{Key: "a", Value: int32(2)}}, false},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			if value.EqualValues(p.a, p.b) != p.want {
				t.Fatalf("the case is wrong: EqualValues = %v", !p.want)
			}
			ca, err1 := appendCode(nil, p.a, codeEqual)
			cb, err2 := appendCode(nil, p.b, codeEqual)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if bytes.Equal(ca, cb) != p.want {
				t.Fatalf("codes equal = %v, EqualValues = %v", !p.want, p.want)
			}
		})
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		kind := rng.IntN(13)
		a, b := randomScalar(rng, kind), randomScalar(rng, kind)
		ca, _ := appendCode(nil, a, codeEqual)
		cb, _ := appendCode(nil, b, codeEqual)
		if bytes.Equal(ca, cb) != value.EqualValues(a, b) {
			t.Fatalf("%#v and %#v: codes equal %v, EqualValues %v", a, b, bytes.Equal(ca, cb), value.EqualValues(a, b))
		}
	}
}

func TestValueCodeRefusesForeignValues(t *testing.T) {
	if _, err := appendCode(nil, struct{}{}, codeExact); err == nil {
		t.Fatal("a struct{} was encoded")
	}
	for _, bad := range [][]byte{nil, {tagString, 'a'}, {tagInt64, 1}, {0xEE}, {tagList, 5}} {
		if _, _, err := readCode(bad); err == nil {
			t.Errorf("code %x decoded", bad)
		}
	}
}
