package datastream

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/dsdelta/dsdelta/shared/value"
)

// maxDecimalDigits is Delta's largest decimal precision.
const maxDecimalDigits = 38

// inferJSON types a payload value without a schema (rules in json.go).
// Strings are copied into arena and values boxed from al, as
// convertJSONIn does; plain says whether a string token has no escapes.
func inferJSON(raw json.RawMessage, plain bool, arena *strArena, al *slabs) (value.Type, any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return value.String, nil, nil
	}
	switch c := raw[0]; {
	case c == 'n':
		return value.String, nil, nil
	case c == 't' || c == 'f':
		return value.Boolean, c == 't', nil
	case c == '"':
		s, err := arena.unquoteSpan(raw, plain)
		if err != nil {
			return nil, nil, fieldErr("", "malformed string", err)
		}
		return value.String, al.boxString(s), nil
	case c == '{' || c == '[':
		return value.String, compactJSON(raw), nil
	default:
		if n, ok := smallInt(raw); ok {
			return value.Long, al.boxLong(n), nil // the common case, without copying the text
		}
		if d, ok := smallFraction(raw, al); ok && d.Scale <= maxDecimalDigits {
			return inferredDecimals[d.Scale], al.boxDecimal(d), nil
		}
		text := string(raw)
		if isIntegerText(text) {
			if n, err := strconv.ParseInt(text, 10, 64); err == nil {
				return value.Long, al.boxLong(n), nil
			}
		}
		d, err := parseDecimalText(text)
		if err != nil {
			return nil, nil, fieldErr("", "malformed number", err)
		}
		if d.Scale < 0 {
			if d, err = d.Rescale(0); err != nil {
				return value.String, text, nil
			}
		}
		if d.Precision() > maxDecimalDigits || d.Scale > maxDecimalDigits {
			return value.String, text, nil
		}
		return inferredDecimals[d.Scale], al.boxDecimal(d), nil
	}
}

// inferredDecimals are the types inferJSON gives decimals, by scale, made
// into value.Type once: a DecimalType put in the interface anew took an
// allocation for every decimal value decoded. Read only.
var inferredDecimals = func() (ts [maxDecimalDigits + 1]value.Type) {
	for s := range ts {
		ts[s] = value.DecimalType{Precision: maxDecimalDigits, Scale: s}
	}
	return ts
}()

func isIntegerText(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// parseDecimalText parses a JSON number or decimal text exactly, including
// an exponent ("1.5e3" → 1500 with scale 0... kept as unscaled 15, scale -2).
func parseDecimalText(s string) (value.Decimal, error) {
	s = strings.TrimSpace(s)
	mant, exp := s, int64(0)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		e, err := strconv.ParseInt(strings.TrimPrefix(s[i+1:], "+"), 10, 32)
		if err != nil || e > 1000 || e < -1000 {
			return value.Decimal{}, fmt.Errorf("number %q: exponent out of range", s)
		}
		exp = e
	}
	if len(mant) > 1000 {
		return value.Decimal{}, fmt.Errorf("number %q has too many digits", s[:40]+"…")
	}
	d, err := value.ParseDecimal(mant)
	if err != nil {
		return value.Decimal{}, err
	}
	d.Scale -= int(exp)
	return d, nil
}

// smallFraction is parseDecimalText of a number with a fraction, at most
// 18 digits and no exponent (the common decimal), without copying its
// text, its big.Int cut from al; ok is false for any other number.
func smallFraction(raw []byte, al *slabs) (value.Decimal, bool) {
	dot := bytes.IndexByte(raw, '.')
	if dot < 0 {
		return value.Decimal{}, false
	}
	return smallDecimal(raw, value.DecimalType{Precision: maxDecimalDigits, Scale: len(raw) - dot - 1}, al)
}

// toDecimal converts number text to decimal(p,s) exactly or fails.
func toDecimal(text string, dt value.DecimalType) (value.Decimal, error) {
	d, err := parseDecimalText(text)
	if err != nil {
		return value.Decimal{}, err
	}
	if d, err = d.Rescale(dt.Scale); err != nil {
		return value.Decimal{}, fmt.Errorf("%s does not fit %s without rounding", text, dt)
	}
	if d.Precision() > dt.Precision && d.Unscaled.Sign() != 0 {
		return value.Decimal{}, fmt.Errorf("%s has more than %d digits for %s", text, dt.Precision, dt)
	}
	return d, nil
}

// smallDecimal converts JSON number text of at most 18 digits, without an
// exponent, to decimal dt when it fits exactly, its big.Int cut from al; ok
// is false for anything else, which toDecimal then converts or refuses.
func smallDecimal(b []byte, dt value.DecimalType, al *slabs) (value.Decimal, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	var n uint64
	digits, frac := 0, -1 // frac counts fraction digits once '.' is seen
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			if n != 0 || c != '0' || frac >= 0 { // leading zeros do not count
				digits++
			}
			n = n*10 + uint64(c-'0')
			if frac >= 0 {
				frac++
			}
		case c == '.' && frac < 0:
			frac = 0
		default:
			return value.Decimal{}, false
		}
	}
	if len(b) == 0 || digits > 18 || frac == 0 {
		return value.Decimal{}, false
	}
	scale := max(frac, 0)
	for ; scale > dt.Scale; scale-- {
		if n%10 != 0 {
			return value.Decimal{}, false // digits would be lost
		}
		n /= 10
	}
	for ; scale < dt.Scale; scale++ {
		if n > (1<<63-1)/10 {
			return value.Decimal{}, false
		}
		n *= 10
	}
	p := 1
	for x := n; x >= 10; x /= 10 {
		p++
	}
	if (p > dt.Precision && n != 0) || n > 1<<63-1 {
		return value.Decimal{}, false
	}
	u := al.bigInt()
	u.i.SetBits(u.w[:0])
	u.i.SetInt64(int64(n))
	if neg {
		u.i.Neg(&u.i)
	}
	return value.Decimal{Unscaled: &u.i, Scale: dt.Scale}, true
}

// convertJSON converts a JSON value to the Go representation of t.
func convertJSON(t value.Type, raw json.RawMessage) (any, error) {
	return convertJSONIn(t, bytes.TrimSpace(raw), false, nil, nil)
}

// convertJSONIn is convertJSON of a value without surrounding white space
// (as the framer's spans locate it), copying the value of a string column
// into arena and cutting small decimals and boxes from al. plain tells a
// string that reads as itself (scanString), so its bytes need no second
// look.
func convertJSONIn(t value.Type, raw json.RawMessage, plain bool, arena *strArena, al *slabs) (any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	c := raw[0]
	var str string
	isStr := c == '"'
	if isStr && (t == value.Timestamp || t == value.TimestampNTZ) {
		if us, ok := fastMicros(raw[1 : len(raw)-1]); ok {
			if t == value.TimestampNTZ {
				return value.LocalMicros(us), nil
			}
			return al.boxMicros(us), nil
		}
	}
	if isStr {
		var err error
		if t == value.String {
			// The text is the value, kept with the event.
			str, err = arena.unquoteSpan(raw, plain)
		} else {
			str, err = unquote(raw)
		}
		if err != nil {
			return nil, fieldErr("", "malformed string", err)
		}
	}
	isNum := c == '-' || (c >= '0' && c <= '9')
	// numText is the number as text, whether written as a number or quoted.
	// Converting raw copies it, so the common cases below avoid it.
	numText := str
	if isNum {
		switch tt := t.(type) {
		case value.Primitive:
			if n, ok := smallInt(raw); ok {
				switch {
				case tt == value.Long:
					return al.boxLong(n), nil
				case tt == value.Integer && n == int64(int32(n)):
					return int32(n), nil
				}
			}
		case value.DecimalType:
			if d, ok := smallDecimal(raw, tt, al); ok {
				return al.boxDecimal(d), nil
			}
		}
		numText = string(raw)
	}
	mismatch := func() error {
		return fieldErr("", fmt.Sprintf("JSON %s does not fit type %s", jsonKind(c), t), nil)
	}
	switch tt := t.(type) {
	case value.Primitive:
		switch tt {
		case value.String:
			switch {
			case isStr:
				return al.boxString(str), nil
			case c == '{' || c == '[' || isNum || c == 't' || c == 'f':
				return compactJSON(raw), nil
			}
		case value.Boolean:
			switch {
			case string(raw) == "true" || (isStr && strings.EqualFold(str, "true")):
				return true, nil
			case string(raw) == "false" || (isStr && strings.EqualFold(str, "false")):
				return false, nil
			}
		case value.Byte, value.Short, value.Integer, value.Long:
			if !isNum && !isStr {
				return nil, mismatch()
			}
			n, err := value.ParseInteger(tt, strings.TrimSpace(numText))
			if err != nil {
				return nil, fieldErr("", fmt.Sprintf("%q is not a %d-bit integer", numText, value.IntegerBits(tt)), nil)
			}
			return n, nil
		case value.Float, value.Double:
			if !isNum && !isStr {
				return nil, mismatch()
			}
			bits := 64
			if tt == value.Float {
				bits = 32
			}
			f, err := parseFloatText(numText, bits)
			if err != nil {
				return nil, fieldErr("", "invalid floating-point number", err)
			}
			if tt == value.Float {
				return float32(f), nil
			}
			return f, nil
		case value.Binary:
			if !isStr {
				return nil, mismatch()
			}
			if b, err := base64.StdEncoding.DecodeString(str); err == nil {
				return b, nil
			}
			if b, err := hex.DecodeString(str); err == nil {
				return b, nil
			}
			return nil, fieldErr("", "binary value is neither base64 nor hex", nil)
		case value.Date:
			if isNum {
				n, err := strconv.ParseInt(numText, 10, 32)
				if err != nil {
					return nil, fieldErr("", "date number is not days since 1970-01-01", nil)
				}
				return value.Days(n), nil
			}
			if !isStr {
				return nil, mismatch()
			}
			tm, _, err := parseTimestamp(str)
			if err != nil {
				return nil, fieldErr("", "invalid date", err)
			}
			return value.DaysOf(tm), nil
		case value.Timestamp, value.TimestampNTZ:
			var us int64
			if isNum {
				n, err := strconv.ParseInt(numText, 10, 64)
				if err != nil {
					return nil, fieldErr("", "timestamp number is not integer microseconds", nil)
				}
				us = n
			} else if isStr {
				tm, _, err := parseTimestamp(str)
				if err != nil {
					return nil, fieldErr("", "invalid timestamp", err)
				}
				us = int64(value.MicrosOf(tm))
			} else {
				return nil, mismatch()
			}
			if tt == value.TimestampNTZ {
				return value.LocalMicros(us), nil
			}
			return value.Micros(us), nil
		}
		return nil, mismatch()
	case value.DecimalType:
		if !isNum && !isStr {
			return nil, mismatch()
		}
		d, err := toDecimal(numText, tt)
		if err != nil {
			return nil, fieldErr("", "invalid decimal", err)
		}
		return d, nil
	case value.StructType:
		if c != '{' {
			return nil, mismatch()
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return nil, fieldErr("", "malformed object", err)
		}
		out := make([]any, len(tt.Fields))
		for i, f := range tt.Fields {
			v, err := convertJSON(f.Type, obj[f.Name])
			if err != nil {
				return nil, prefixField(f.Name, err)
			}
			out[i] = v
		}
		return out, nil
	case value.ArrayType:
		if c != '[' {
			return nil, mismatch()
		}
		var arr []json.RawMessage
		if err := json.Unmarshal(raw, &arr); err != nil {
			return nil, fieldErr("", "malformed array", err)
		}
		out := make([]any, len(arr))
		for i, e := range arr {
			v, err := convertJSON(tt.Element, e)
			if err != nil {
				return nil, prefixField(fmt.Sprintf("[%d]", i), err)
			}
			out[i] = v
		}
		return out, nil
	case value.MapType:
		if c != '{' {
			return nil, mismatch()
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		_, _ = dec.Token()
		var out []value.MapEntry
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, fieldErr("", "malformed object", err)
			}
			k, _ := kt.(string)
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return nil, fieldErr(k, "malformed value", err)
			}
			kv, err := convertJSON(tt.Key, json.RawMessage(strconv.Quote(k)))
			if err != nil {
				return nil, prefixField(k, err)
			}
			vv, err := convertJSON(tt.Value, v)
			if err != nil {
				return nil, prefixField(k, err)
			}
			out = append(out, value.MapEntry{Key: kv, Value: vv})
		}
		return out, nil
	}
	return nil, mismatch()
}

func parseFloatText(s string, bits int) (float64, error) {
	switch strings.TrimSpace(s) {
	case "NaN":
		return math.NaN(), nil
	case "Infinity", "+Infinity":
		return math.Inf(1), nil
	case "-Infinity":
		return math.Inf(-1), nil
	}
	return strconv.ParseFloat(strings.TrimSpace(s), bits)
}

func jsonKind(c byte) string {
	switch {
	case c == '"':
		return "string"
	case c == '{':
		return "object"
	case c == '[':
		return "array"
	case c == 't' || c == 'f':
		return "boolean"
	}
	return "number"
}

// bigTwoComplement decodes a big-endian two's-complement integer (Avro
// decimal bytes).
func bigTwoComplement(b []byte) *big.Int {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(b))*8))
	}
	return n
}
