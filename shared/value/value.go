package value

import (
	"fmt"
	"math/big"
	"strings"
	"time"
)

// Decimal is an exact decimal number: Unscaled × 10^-Scale.
type Decimal struct {
	Unscaled *big.Int
	Scale    int
}

// ParseDecimal parses plain decimal text ("-12.340", "7", "1e3" is refused)
// keeping every digit; the scale is the number of fraction digits.
func ParseDecimal(s string) (Decimal, error) {
	t := strings.TrimSpace(s)
	neg := false
	if strings.HasPrefix(t, "-") || strings.HasPrefix(t, "+") {
		neg = t[0] == '-'
		t = t[1:]
	}
	intPart, frac, _ := strings.Cut(t, ".")
	if intPart == "" && frac == "" {
		return Decimal{}, fmt.Errorf("parse decimal %q: no digits", s)
	}
	digits := intPart + frac
	for _, c := range digits {
		if c < '0' || c > '9' {
			return Decimal{}, fmt.Errorf("parse decimal %q: unexpected %q", s, c)
		}
	}
	u, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		return Decimal{}, fmt.Errorf("parse decimal %q", s)
	}
	if neg {
		u.Neg(u)
	}
	return Decimal{Unscaled: u, Scale: len(frac)}, nil
}

// Rescale returns d with the given scale; it fails when digits would be lost.
func (d Decimal) Rescale(scale int) (Decimal, error) {
	if d.Scale == scale {
		return d, nil
	}
	u := new(big.Int).Set(d.Unscaled)
	if scale > d.Scale {
		u.Mul(u, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale-d.Scale)), nil))
		return Decimal{Unscaled: u, Scale: scale}, nil
	}
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.Scale-scale)), nil)
	q, r := new(big.Int).QuoRem(u, p, new(big.Int))
	if r.Sign() != 0 {
		return Decimal{}, fmt.Errorf("decimal %s does not fit scale %d", d, scale)
	}
	return Decimal{Unscaled: q, Scale: scale}, nil
}

// Precision is the number of decimal digits of the unscaled value.
func (d Decimal) Precision() int {
	if d.Unscaled == nil {
		return 1
	}
	if d.Unscaled.IsInt64() { // the digits of |n| without rendering them
		n := d.Unscaled.Int64()
		u := uint64(n)
		if n < 0 {
			u = -u
		}
		p := 1
		for ; u >= 10; u /= 10 {
			p++
		}
		return p
	}
	s := new(big.Int).Abs(d.Unscaled).String()
	return len(s)
}

// Cmp compares two decimals numerically (-1, 0, +1).
func (d Decimal) Cmp(o Decimal) int {
	s := max(d.Scale, o.Scale)
	a, _ := d.Rescale(s)
	b, _ := o.Rescale(s)
	return a.Unscaled.Cmp(b.Unscaled)
}

// String renders the decimal with exactly Scale fraction digits ("8888.00").
func (d Decimal) String() string {
	if d.Unscaled == nil {
		return "0"
	}
	neg := d.Unscaled.Sign() < 0
	digits := new(big.Int).Abs(d.Unscaled).String()
	if d.Scale > 0 {
		if len(digits) <= d.Scale {
			digits = strings.Repeat("0", d.Scale-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-d.Scale] + "." + digits[len(digits)-d.Scale:]
	} else if d.Scale < 0 {
		digits += strings.Repeat("0", -d.Scale)
	}
	if neg {
		return "-" + digits
	}
	return digits
}

// Days is a date: days since 1970-01-01.
type Days int32

// DaysOf returns the date of t (in t's location).
func DaysOf(t time.Time) Days {
	y, m, d := t.Date()
	return Days(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400)
}

// Time returns midnight UTC of the date.
func (d Days) Time() time.Time { return time.Unix(int64(d)*86400, 0).UTC() }

// String renders YYYY-MM-DD.
func (d Days) String() string { return d.Time().Format(dateLayout) }

// dateLayout is the text of a date (Days).
const dateLayout = "2006-01-02"

// Micros is an instant: microseconds since 1970-01-01T00:00:00Z.
type Micros int64

// MicrosOf converts a time to Micros, truncating below a microsecond.
func MicrosOf(t time.Time) Micros { return Micros(t.Unix()*1_000_000 + int64(t.Nanosecond()/1000)) }

// Time returns the instant in UTC.
func (m Micros) Time() time.Time {
	s, us := int64(m)/1_000_000, int64(m)%1_000_000
	if us < 0 {
		s--
		us += 1_000_000
	}
	return time.Unix(s, us*1000).UTC()
}

// String renders RFC 3339 UTC with microseconds: 2024-01-02T03:04:05.000006Z.
func (m Micros) String() string { return m.Time().Format("2006-01-02T15:04:05.000000Z") }

// LocalMicros is a wall-clock timestamp without zone (timestamp_ntz):
// microseconds since 1970-01-01T00:00:00 on the same clock.
type LocalMicros int64

// String renders 2024-01-02T03:04:05.000006 (no zone).
func (m LocalMicros) String() string {
	return Micros(m).Time().Format("2006-01-02T15:04:05.000000")
}

// MapEntry is one key/value pair of a map value.
type MapEntry struct {
	Key   any
	Value any
}
