package value

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends v, of type t, in the canonical JSON encoding shared by
// `dsdelta show --format jsonl` and `dsdelta decode`: integers as numbers,
// decimals as strings carrying their scale ("8888.00"), timestamps as RFC 3339
// UTC with microseconds, dates as YYYY-MM-DD, binary as base64, NaN and
// infinities as strings, structs as objects, arrays as arrays, maps as
// objects whose keys are the keys' text.
func AppendJSON(dst []byte, t Type, v any) ([]byte, error) {
	if v == nil {
		return append(dst, "null"...), nil
	}
	switch x := v.(type) {
	case bool:
		return strconv.AppendBool(dst, x), nil
	case int8:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int16:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case float32:
		return appendFloat(dst, float64(x), 32), nil
	case float64:
		return appendFloat(dst, x, 64), nil
	case string:
		return appendString(dst, x), nil
	case []byte:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, x)
		return append(dst, '"'), nil
	case Decimal:
		return appendString(dst, x.String()), nil
	case Days:
		// x.String() without its allocation: a date's text needs no
		// escaping.
		dst = append(dst, '"')
		dst = x.Time().AppendFormat(dst, dateLayout)
		return append(dst, '"'), nil
	case Micros:
		return appendString(dst, x.String()), nil
	case LocalMicros:
		return appendString(dst, x.String()), nil
	case []MapEntry:
		mt, _ := t.(MapType)
		dst = append(dst, '{')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, keyText(mt.Key, e.Key))
			dst = append(dst, ':')
			var err error
			if dst, err = AppendJSON(dst, mt.Value, e.Value); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case []any:
		if st, ok := t.(StructType); ok {
			if len(x) != len(st.Fields) {
				return dst, fmt.Errorf("struct value has %d fields, type %s has %d", len(x), st, len(st.Fields))
			}
			return AppendRowJSON(dst, st, x)
		}
		at, _ := t.(ArrayType)
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = AppendJSON(dst, at.Element, e); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	}
	return dst, fmt.Errorf("encode %T as JSON for type %v: unsupported value", v, t)
}

// AppendRowJSON appends a row (one value per field of st) as a JSON object
// keyed by column name.
func AppendRowJSON(dst []byte, st StructType, row []any) ([]byte, error) {
	dst = append(dst, '{')
	for i, f := range st.Fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, f.Name)
		dst = append(dst, ':')
		var v any
		if i < len(row) {
			v = row[i]
		}
		var err error
		if dst, err = AppendJSON(dst, f.Type, v); err != nil {
			return dst, fmt.Errorf("column %q: %w", f.Name, err)
		}
	}
	return append(dst, '}'), nil
}

func keyText(t Type, k any) string {
	switch x := k.(type) {
	case string:
		return x
	case nil:
		return "null"
	}
	b, err := AppendJSON(nil, t, k)
	if err != nil {
		return fmt.Sprint(k)
	}
	if len(b) >= 2 && b[0] == '"' {
		if s, err := strconv.Unquote(string(b)); err == nil {
			return s
		}
	}
	return string(b)
}

func appendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

// appendString writes a JSON string; invalid UTF-8 is replaced with U+FFFD.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, "\ufffd"...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
