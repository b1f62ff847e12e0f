package value

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
)

// Widen returns the narrowest type that holds every value of a and of b
// when one is a numeric or date widening of the other (the changes Delta's
// type widening allows: byte < short < integer < long < decimal, float <
// double, integers into double up to 32 bits, decimals to more digits,
// date into timestamp_ntz); ok is false for any other pair. Decimal results
// are capped at 38 digits: Convert then checks each value fits.
func Widen(a, b Type) (Type, bool) {
	if Equal(a, b) {
		return a, true
	}
	ra, aInt := intRank(a)
	rb, bInt := intRank(b)
	da, aDec := a.(DecimalType)
	db, bDec := b.(DecimalType)
	switch {
	case aInt && bInt:
		if ra >= rb {
			return a, true
		}
		return b, true
	case aInt && bDec:
		return widenDecimal(DecimalType{Precision: intDigits[ra], Scale: 0}, db), true
	case aDec && bInt:
		return widenDecimal(da, DecimalType{Precision: intDigits[rb], Scale: 0}), true
	case aDec && bDec:
		return widenDecimal(da, db), true
	}
	pa, _ := a.(Primitive)
	pb, _ := b.(Primitive)
	switch {
	case (pa == Float && pb == Double) || (pa == Double && pb == Float):
		return Double, true
	case pa == Double && bInt && rb <= 2, pb == Double && aInt && ra <= 2:
		return Double, true
	case (pa == Date && pb == TimestampNTZ) || (pa == TimestampNTZ && pb == Date):
		return TimestampNTZ, true
	}
	return nil, false
}

var intDigits = [...]int{3, 5, 10, 19}

func intRank(t Type) (int, bool) {
	switch t {
	case Byte:
		return 0, true
	case Short:
		return 1, true
	case Integer:
		return 2, true
	case Long:
		return 3, true
	}
	return 0, false
}

func widenDecimal(a, b DecimalType) DecimalType {
	scale := max(a.Scale, b.Scale)
	whole := max(a.Precision-a.Scale, b.Precision-b.Scale)
	p := min(38, whole+scale)
	return DecimalType{Precision: p, Scale: min(scale, p)}
}

// Convert returns v, a value of type from, as a value of type to, exactly;
// it fails when to cannot hold the value (a decimal that needs more digits,
// an integer out of range) or the types are unrelated.
func Convert(v any, from, to Type) (any, error) {
	if v == nil || Equal(from, to) {
		return v, nil
	}
	switch t := to.(type) {
	case DecimalType:
		var d Decimal
		switch x := v.(type) {
		case Decimal:
			d = x
		case int8, int16, int32, int64:
			d = Decimal{Unscaled: big.NewInt(toInt64(x)), Scale: 0}
		default:
			return nil, fmt.Errorf("convert %T to %s", v, to)
		}
		r, err := d.Rescale(t.Scale)
		if err != nil {
			return nil, err
		}
		if r.Precision() > t.Precision {
			return nil, fmt.Errorf("%s does not fit %s", d, to)
		}
		return r, nil
	case Primitive:
		switch t {
		case Short, Integer, Long, Byte:
			n, ok := intOf(v)
			if !ok {
				return nil, fmt.Errorf("convert %T to %s", v, to)
			}
			switch t {
			case Byte:
				if n < math.MinInt8 || n > math.MaxInt8 {
					return nil, fmt.Errorf("%d does not fit byte", n)
				}
				return int8(n), nil
			case Short:
				if n < math.MinInt16 || n > math.MaxInt16 {
					return nil, fmt.Errorf("%d does not fit short", n)
				}
				return int16(n), nil
			case Integer:
				if n < math.MinInt32 || n > math.MaxInt32 {
					return nil, fmt.Errorf("%d does not fit integer", n)
				}
				return int32(n), nil
			}
			return n, nil
		case Double:
			switch x := v.(type) {
			case float32:
				return float64(x), nil
			case int8, int16, int32:
				return float64(toInt64(x)), nil
			}
		case TimestampNTZ:
			if d, ok := v.(Days); ok {
				return LocalMicros(int64(d) * 86400 * 1_000_000), nil
			}
		}
	}
	return nil, fmt.Errorf("convert %T from %s to %s", v, from, to)
}

// Widest is v as the widest Go type of its kind of number: an int8, int16
// or int32 as an int64, a float32 as a float64; any other value as it is.
// Values of a column widened between files compare alike this way.
func Widest(v any) any {
	if i, ok := intOf(v); ok {
		return i
	}
	if f, ok := v.(float32); ok {
		return float64(f)
	}
	return v
}

func intOf(v any) (int64, bool) {
	switch v.(type) {
	case int8, int16, int32, int64:
		return toInt64(v), true
	}
	return 0, false
}

func toInt64(v any) int64 {
	switch x := v.(type) {
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int64:
		return x
	}
	return 0
}

// IntegerBits is the width of the integer type t (8 for Byte, 16, 32, 64
// for Long), or 0 when t is not an integer type.
func IntegerBits(t Primitive) int {
	switch t {
	case Byte:
		return 8
	case Short:
		return 16
	case Integer:
		return 32
	case Long:
		return 64
	}
	return 0
}

// ParseInteger parses base-10 text as a value of the integer type t (Byte,
// Short, Integer or Long): an int8, int16, int32 or int64. Text outside t's
// range is an error (a *strconv.NumError), as is a t that is not an integer
// type.
func ParseInteger(t Primitive, text string) (any, error) {
	bits := IntegerBits(t)
	if bits == 0 {
		return nil, fmt.Errorf("parse %q: %s is not an integer type", text, t)
	}
	n, err := strconv.ParseInt(text, 10, bits)
	if err != nil {
		return nil, err
	}
	switch t {
	case Byte:
		return int8(n), nil
	case Short:
		return int16(n), nil
	case Integer:
		return int32(n), nil
	}
	return n, nil
}
