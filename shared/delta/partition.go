package delta

import (
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dsdelta/dsdelta/shared/value"
)

// hiveNull is the directory name Hive and Spark use for a null partition value.
const hiveNull = "__HIVE_DEFAULT_PARTITION__"

// FormatPartitionValue serializes a partition value for add.partitionValues
// following Delta's Partition Value Serialization: nil (and, as Spark does,
// the empty string) is JSON null; numbers are decimal text (floats in Java's
// Double.toString form, "1.0"); decimals are plain text at the column's
// scale; dates YYYY-MM-DD; timestamps ISO-8601 UTC with microseconds
// ("2024-01-02T03:04:05.000006Z"); timestamp_ntz "2024-01-02 03:04:05.000006".
// Binary and nested types cannot be partition columns.
func FormatPartitionValue(t value.Type, v any) (*string, error) {
	if v == nil {
		return nil, nil
	}
	var s string
	switch x := v.(type) {
	case string:
		if x == "" {
			return nil, nil
		}
		s = x
	case bool:
		s = strconv.FormatBool(x)
	case int8:
		s = strconv.FormatInt(int64(x), 10)
	case int16:
		s = strconv.FormatInt(int64(x), 10)
	case int32:
		s = strconv.FormatInt(int64(x), 10)
	case int64:
		s = strconv.FormatInt(x, 10)
	case float32:
		s = string(appendJavaFloat(nil, float64(x), 32))
	case float64:
		s = string(appendJavaFloat(nil, x, 64))
	case value.Decimal:
		if dt, ok := t.(value.DecimalType); ok {
			r, err := x.Rescale(dt.Scale)
			if err != nil {
				return nil, fmt.Errorf("format partition value: %w", err)
			}
			x = r
		}
		s = x.String()
	case value.Days:
		s = x.String()
	case value.Micros:
		s = x.String()
	case value.LocalMicros:
		s = value.Micros(x).Time().Format("2006-01-02 15:04:05.000000")
	default:
		return nil, fmt.Errorf("format partition value %v (%T) of type %v: unsupported", v, v, t)
	}
	if err := checkValueType(t, v); err != nil {
		return nil, fmt.Errorf("format partition value: %w", err)
	}
	return &s, nil
}

// ParsePartitionValue parses a serialized partition value into the Go value
// representation of t. JSON null is nil; an empty string is nil for every
// type but string. Timestamps accept "YYYY-MM-DD HH:MM:SS[.ffffff]" (read as
// UTC, since the writer's zone is unknown) and ISO-8601 with or without a
// zone.
func ParsePartitionValue(t value.Type, s *string) (any, error) {
	if s == nil {
		return nil, nil
	}
	text := *s
	if text == "" {
		if t == value.String {
			return "", nil
		}
		return nil, nil
	}
	fail := func(err error) (any, error) {
		return nil, fmt.Errorf("parse partition value %q as %v: %w", text, t, err)
	}
	switch tt := t.(type) {
	case value.DecimalType:
		d, err := value.ParseDecimal(text)
		if err != nil {
			return fail(err)
		}
		if d, err = d.Rescale(tt.Scale); err != nil {
			return fail(err)
		}
		return d, nil
	case value.Primitive:
		switch tt {
		case value.String:
			return text, nil
		case value.Binary:
			return []byte(text), nil
		case value.Boolean:
			b, err := strconv.ParseBool(strings.ToLower(text))
			if err != nil {
				return fail(err)
			}
			return b, nil
		case value.Byte, value.Short, value.Integer, value.Long:
			n, err := value.ParseInteger(tt, text)
			if err != nil {
				return fail(err)
			}
			return n, nil
		case value.Float:
			f, err := strconv.ParseFloat(text, 32)
			if err != nil {
				return fail(err)
			}
			return float32(f), nil
		case value.Double:
			f, err := strconv.ParseFloat(text, 64)
			if err != nil {
				return fail(err)
			}
			return f, nil
		case value.Date:
			d, err := time.Parse("2006-01-02", text)
			if err != nil {
				return fail(err)
			}
			return value.DaysOf(d), nil
		case value.Timestamp:
			ts, err := parsePartitionTime(text, true)
			if err != nil {
				return fail(err)
			}
			return value.MicrosOf(ts), nil
		case value.TimestampNTZ:
			ts, err := parsePartitionTime(text, false)
			if err != nil {
				return fail(err)
			}
			return value.LocalMicros(value.MicrosOf(ts)), nil
		}
	}
	return fail(fmt.Errorf("not a partition column type"))
}

// parsePartitionTime parses the timestamp forms Delta writers use. Without
// a zone the wall clock is taken as UTC; with one (zoned) the instant is
// converted to UTC, while for timestamp_ntz the wall clock is kept.
func parsePartitionTime(s string, zoned bool) (time.Time, error) {
	layouts := []string{
		"2006-01-02 15:04:05.999999999",
		"2006-01-02T15:04:05.999999999",
		"2006-01-02 15:04:05.999999999Z07:00",
		"2006-01-02T15:04:05.999999999Z07:00",
		"2006-01-02 15:04:05.999999999Z0700",
		"2006-01-02T15:04:05.999999999Z0700",
		"2006-01-02T15:04Z07:00",
		"2006-01-02T15:04",
		"2006-01-02",
	}
	var firstErr error
	for _, l := range layouts {
		t, err := time.Parse(l, s)
		if err == nil {
			if !zoned {
				y, mo, d := t.Date()
				h, mi, sec := t.Clock()
				return time.Date(y, mo, d, h, mi, sec, t.Nanosecond(), time.UTC), nil
			}
			return t.UTC(), nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return time.Time{}, firstErr
}

// hiveEscape escapes a partition value for a directory name the way Hive
// and Spark do (ExternalCatalogUtils.escapePathName).
func hiveEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if hiveNeedsEscape(c) {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

func hiveNeedsEscape(c byte) bool {
	if c >= 0x01 && c <= 0x1F || c == 0x7F {
		return true
	}
	return strings.IndexByte("\"#%'*/:=?\\{[]^", c) >= 0
}

// partitionDir returns the Hive-style directory for the partition values,
// "a=1/b=x%3Ay", from the serialized values (nil = null).
func partitionDir(names []string, values map[string]*string) string {
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(hiveEscape(n))
		b.WriteByte('=')
		if v := values[n]; v == nil {
			b.WriteString(hiveNull)
		} else {
			b.WriteString(hiveEscape(*v))
		}
	}
	return b.String()
}

// encodeAddPath URI-encodes a relative object name for add.path (RFC 2396:
// unreserved and path punctuation stay, everything else is %XX of the
// UTF-8 bytes).
func encodeAddPath(name string) string {
	const keep = "-_.!~*'()/;:@&=+$,"
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(keep, c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// decodeAddPath turns add.path into an object name relative to the table
// root: it is URI-decoded exactly once ('+' stays '+').
func decodeAddPath(p string) (string, error) {
	if strings.Contains(p, "://") || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "file:") {
		return "", fmt.Errorf("data file path %q is absolute; only paths relative to the table root are supported", p)
	}
	name, err := url.PathUnescape(p)
	if err != nil {
		return "", fmt.Errorf("decode data file path %q: %w", p, err)
	}
	return name, nil
}

// checkValueType reports whether v is the Go representation of t.
func checkValueType(t value.Type, v any) error {
	if v == nil {
		return nil
	}
	ok := false
	switch tt := t.(type) {
	case value.DecimalType:
		_, ok = v.(value.Decimal)
	case value.Primitive:
		switch tt {
		case value.String:
			_, ok = v.(string)
		case value.Binary:
			_, ok = v.([]byte)
		case value.Boolean:
			_, ok = v.(bool)
		case value.Byte:
			_, ok = v.(int8)
		case value.Short:
			_, ok = v.(int16)
		case value.Integer:
			_, ok = v.(int32)
		case value.Long:
			_, ok = v.(int64)
		case value.Float:
			_, ok = v.(float32)
		case value.Double:
			_, ok = v.(float64)
		case value.Date:
			_, ok = v.(value.Days)
		case value.Timestamp:
			_, ok = v.(value.Micros)
		case value.TimestampNTZ:
			_, ok = v.(value.LocalMicros)
		}
	case value.StructType, value.ArrayType:
		_, ok = v.([]any)
	case value.MapType:
		_, ok = v.([]value.MapEntry)
	}
	if !ok {
		return fmt.Errorf("%w: %T is not a %v value", ErrValueType, v, t)
	}
	return nil
}

// isFinite reports whether f is neither NaN nor infinite.
func isFinite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
