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
//
// It converts the common cases itself (timestamps, strings, small
// integers and decimals) and hands the rest to convertText, so that those
// cost no further call: BenchmarkDecode/jsonl-schema-sequential types
// every payload value here.
func convertJSONIn(t value.Type, raw json.RawMessage, plain bool, arena *strArena, al *slabs) (any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	v := jsonText{raw: raw, c: raw[0]}
	v.isStr = v.c == '"'
	if v.isStr && (t == value.Timestamp || t == value.TimestampNTZ) {
		if us, ok := fastMicros(raw[1 : len(raw)-1]); ok {
			if t == value.TimestampNTZ {
				return value.LocalMicros(us), nil
			}
			return al.boxMicros(us), nil
		}
	}
	if v.isStr {
		var err error
		if t == value.String {
			// The text is the value, kept with the event.
			if v.str, err = arena.unquoteSpan(raw, plain); err == nil {
				return al.boxString(v.str), nil
			}
		} else {
			v.str, err = unquote(raw)
		}
		if err != nil {
			return nil, fieldErr("", "malformed string", err)
		}
	}
	v.isNum = v.c == '-' || (v.c >= '0' && v.c <= '9')
	// v.num is the number as text, whether written as a number or quoted.
	// Converting raw copies it, so the common cases below avoid it.
	v.num = v.str
	if v.isNum {
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
		v.num = string(raw)
	}
	return v.convert(t)
}

// jsonText is a JSON value convertJSONIn did not convert by a fast path,
// with what it found out about it.
type jsonText struct {
	raw          json.RawMessage
	c            byte   // raw's first byte
	str          string // a string's value (isStr)
	num          string // the number as text, written as a number or quoted
	isStr, isNum bool
}

// convert converts v to the Go representation of t.
func (v *jsonText) convert(t value.Type) (any, error) {
	switch tt := t.(type) {
	case value.Primitive:
		return v.primitive(tt)
	case value.DecimalType:
		if !v.isNum && !v.isStr {
			return nil, v.mismatch(t)
		}
		d, err := toDecimal(v.num, tt)
		if err != nil {
			return nil, fieldErr("", "invalid decimal", err)
		}
		return d, nil
	case value.StructType:
		return v.structOf(tt)
	case value.ArrayType:
		return v.arrayOf(tt)
	case value.MapType:
		return v.mapOf(tt)
	}
	return nil, v.mismatch(t)
}

// mismatch is the error for a JSON value of a kind type t cannot hold.
func (v *jsonText) mismatch(t value.Type) error {
	return fieldErr("", fmt.Sprintf("JSON %s does not fit type %s", jsonKind(v.c), t), nil)
}

// primitive converts v to primitive type t. A string of a string column
// never reaches it: convertJSONIn returns those.
func (v *jsonText) primitive(t value.Primitive) (any, error) {
	switch t {
	case value.String:
		if c := v.c; c == '{' || c == '[' || v.isNum || c == 't' || c == 'f' {
			return compactJSON(v.raw), nil
		}
	case value.Boolean:
		switch {
		case string(v.raw) == "true" || (v.isStr && strings.EqualFold(v.str, "true")):
			return true, nil
		case string(v.raw) == "false" || (v.isStr && strings.EqualFold(v.str, "false")):
			return false, nil
		}
	case value.Byte, value.Short, value.Integer, value.Long:
		if !v.isNum && !v.isStr {
			return nil, v.mismatch(t)
		}
		n, err := value.ParseInteger(t, strings.TrimSpace(v.num))
		if err != nil {
			return nil, fieldErr("", fmt.Sprintf("%q is not a %d-bit integer", v.num, value.IntegerBits(t)), nil)
		}
		return n, nil
	case value.Float, value.Double:
		if !v.isNum && !v.isStr {
			return nil, v.mismatch(t)
		}
		bits := 64
		if t == value.Float {
			bits = 32
		}
		f, err := parseFloatText(v.num, bits)
		if err != nil {
			return nil, fieldErr("", "invalid floating-point number", err)
		}
		if t == value.Float {
			return float32(f), nil
		}
		return f, nil
	case value.Binary:
		if !v.isStr {
			return nil, v.mismatch(t)
		}
		if b, err := base64.StdEncoding.DecodeString(v.str); err == nil {
			return b, nil
		}
		if b, err := hex.DecodeString(v.str); err == nil {
			return b, nil
		}
		return nil, fieldErr("", "binary value is neither base64 nor hex", nil)
	case value.Date:
		return v.date()
	case value.Timestamp, value.TimestampNTZ:
		return v.timestamp(t)
	}
	return nil, v.mismatch(t)
}

// date converts v, days since 1970-01-01 or a date or timestamp string,
// to a date.
func (v *jsonText) date() (any, error) {
	if v.isNum {
		n, err := strconv.ParseInt(v.num, 10, 32)
		if err != nil {
			return nil, fieldErr("", "date number is not days since 1970-01-01", nil)
		}
		return value.Days(n), nil
	}
	if !v.isStr {
		return nil, v.mismatch(value.Date)
	}
	tm, _, err := parseTimestamp(v.str)
	if err != nil {
		return nil, fieldErr("", "invalid date", err)
	}
	return value.DaysOf(tm), nil
}

// timestamp converts v, microseconds since the epoch or a timestamp
// string, to a timestamp of type t (Timestamp or TimestampNTZ).
func (v *jsonText) timestamp(t value.Primitive) (any, error) {
	var us int64
	if v.isNum {
		n, err := strconv.ParseInt(v.num, 10, 64)
		if err != nil {
			return nil, fieldErr("", "timestamp number is not integer microseconds", nil)
		}
		us = n
	} else if v.isStr {
		tm, _, err := parseTimestamp(v.str)
		if err != nil {
			return nil, fieldErr("", "invalid timestamp", err)
		}
		us = int64(value.MicrosOf(tm))
	} else {
		return nil, v.mismatch(t)
	}
	if t == value.TimestampNTZ {
		return value.LocalMicros(us), nil
	}
	return value.Micros(us), nil
}

// structOf converts a JSON object to a struct of t's fields, in t's order.
func (v *jsonText) structOf(t value.StructType) (any, error) {
	if v.c != '{' {
		return nil, v.mismatch(t)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(v.raw, &obj); err != nil {
		return nil, fieldErr("", "malformed object", err)
	}
	out := make([]any, len(t.Fields))
	for i, f := range t.Fields {
		x, err := convertJSON(f.Type, obj[f.Name])
		if err != nil {
			return nil, prefixField(f.Name, err)
		}
		out[i] = x
	}
	return out, nil
}

// arrayOf converts a JSON array to an array of t's elements.
func (v *jsonText) arrayOf(t value.ArrayType) (any, error) {
	if v.c != '[' {
		return nil, v.mismatch(t)
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(v.raw, &arr); err != nil {
		return nil, fieldErr("", "malformed array", err)
	}
	out := make([]any, len(arr))
	for i, e := range arr {
		x, err := convertJSON(t.Element, e)
		if err != nil {
			return nil, prefixField(fmt.Sprintf("[%d]", i), err)
		}
		out[i] = x
	}
	return out, nil
}

// mapOf converts a JSON object to map entries in the object's order, its
// keys converted as JSON strings.
func (v *jsonText) mapOf(t value.MapType) (any, error) {
	if v.c != '{' {
		return nil, v.mismatch(t)
	}
	dec := json.NewDecoder(bytes.NewReader(v.raw))
	_, _ = dec.Token()
	var out []value.MapEntry
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, fieldErr("", "malformed object", err)
		}
		k, _ := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fieldErr(k, "malformed value", err)
		}
		kv, err := convertJSON(t.Key, json.RawMessage(strconv.Quote(k)))
		if err != nil {
			return nil, prefixField(k, err)
		}
		vv, err := convertJSON(t.Value, raw)
		if err != nil {
			return nil, prefixField(k, err)
		}
		out = append(out, value.MapEntry{Key: kv, Value: vv})
	}
	return out, nil
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
