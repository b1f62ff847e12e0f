package datastream

import (
	"errors"
	"fmt"
	"iter"
	"math/big"
	"strconv"
	"strings"

	"github.com/dsdelta/dsdelta/shared/value"
)

// rawKind is how a payload value was written in JSON, kept so that
// UnifyJSON can decide a column's type from what the file held rather than
// from the per-value guess of the Reader.
type rawKind uint8

const (
	// kindTyped marks a value a schema (Options.Schemas, Options.AvroSchema
	// or an earlier UnifyJSON) typed: its value and type are final.
	kindTyped rawKind = iota
	kindNull
	kindBool
	kindNumber
	kindString
	// kindNested is an object or array, held as its compact JSON text.
	kindNested
)

// jsonSource is what a JSON event remembers of its source for UnifyJSON:
// where it starts and how each payload value was written. It is small: one
// byte per column, plus the text of the rare numbers whose value does not
// render back to what was written (exponents, "-0").
type jsonSource struct {
	file string
	line int64
	// kinds has one entry per Row index; nil once every column is typed.
	kinds []rawKind
	// text holds, by Row index, a number's exact JSON text when the
	// inferred value does not render to it.
	text map[int]string
}

// unsignedBigintDigits is the precision UnifyJSON gives integers beyond
// int64 when every value fits it: decimal(20,0), the type of MySQL BIGINT
// UNSIGNED in Avro streams; wider integers take decimal(38,0). Fractions
// always take precision 38: the precision a later file needs is unknown, a
// Delta column cannot be retyped, and only the scale is dictated by values.
const unsignedBigintDigits = 20

// UnifyJSON gives the JSON events of one file — or of several files of the
// same table — one stable schema, deciding each column's type from all its
// values instead of value by value, and rewrites the events' Schema, Row and
// KeyValues in place. It returns the schema every JSON event now has. Events
// not decoded from JSON (Avro, whose schema is exact) are left untouched and
// do not contribute to the result. Calling it again on the same events
// changes nothing.
//
// The unified schema lists the columns of known (the table's known schema,
// possibly empty) first, in known's order, then every other column in the
// order it first appears. An event that lacks a column holds null for it.
// A column's type is decided as follows (first match wins):
//
//  1. a column a schema typed while decoding (Options.Schemas,
//     Options.AvroSchema) keeps that type; known must agree with it;
//  2. a column of known (matched by exact name, else case-insensitively)
//     takes known's type, and every value is converted to it as
//     Options.Schemas would; a value that does not fit is a bad record;
//  3. otherwise the column's non-null values decide:
//     - none (null or absent everywhere) → string;
//     - only booleans → boolean;
//     - only integers (no fraction, no exponent) → long; when one exceeds
//     int64, decimal(20,0) if every value has at most 20 digits, else
//     decimal(38,0);
//     - numbers, at least one with a fraction or exponent →
//     decimal(38,s), s being the largest number of fraction digits, every
//     value rescaled exactly (never through float64);
//     - only strings that are all strict ISO-8601 timestamps
//     (YYYY-MM-DD, T or a space, HH:MM:SS, 0 to 9 fraction digits, then Z,
//     an offset ±HH[[:]MM] or nothing) → timestamp, the instant in UTC
//     microseconds; a timestamp without a zone is UTC wall-clock time, as
//     Datastream writes UTC;
//     - only strings that are all dates YYYY-MM-DD → date;
//     - only objects and arrays (json/jsonb columns) → string holding the
//     compact JSON text;
//     - anything else — kinds mixed (numbers and strings, booleans and
//     numbers, timestamps and free text, dates and timestamps), or numbers
//     needing more than 38 digits → string, numbers holding their exact
//     JSON text, booleans "true"/"false", objects their compact JSON text.
//
// The result depends only on the values, not on their order. An error is a
// *RecordError matching ErrBadRecord that names the file, the line, the
// record and the field of the first value that does not fit its column's
// type.
func UnifyJSON(events []Event, known value.StructType) (value.StructType, error) {
	return unifyJSON(func(yield func(*Event) bool) {
		for i := range events {
			if !yield(&events[i]) {
				return
			}
		}
	}, known)
}

// unifyJSON is UnifyJSON over events held in any order-keeping container;
// it walks them twice.
func unifyJSON(events iter.Seq[*Event], known value.StructType) (value.StructType, error) {
	fields, lookup, plain, err := unifiedColumns(events, known)
	if err != nil {
		return value.StructType{}, err
	}
	out := value.StructType{Fields: fields}
	// The columns whose inferred values are not yet of their unified type:
	// the only ones an event of the unified columns, in order, converts.
	var convert []int
	for ci := range fields {
		if !plain[ci] {
			convert = append(convert, ci)
		}
	}
	// Events of a file mostly share their decoded schema: its columns'
	// places in the unified schema are looked up once per schema, and rows
	// are cut from slabs (they live and die with their part's events).
	var (
		slab     []any
		boxes    slabs         // the converted values' boxes
		schemaOf []value.Field // the schema places is for
		places   []int
		inPlace  bool // schemaOf's columns are the unified ones, in order
	)
	for ev := range events {
		src := ev.jsonSrc
		if src == nil {
			continue
		}
		if sf := ev.Schema.Fields; !sameSlice(sf, schemaOf) {
			schemaOf, places = sf, places[:0]
			inPlace = len(sf) == len(fields)
			for j, f := range sf {
				places = append(places, lookup[f.Name])
				inPlace = inPlace && places[j] == j
			}
		}
		// An event of the unified columns, the usual case, has its
		// values typed where they are.
		row := ev.Row
		if inPlace && len(row) == len(fields) {
			// Typed where it is: only the columns to convert are touched.
			for _, j := range convert {
				if row[j] == nil {
					continue
				}
				k := src.kind(j)
				if k == kindTyped {
					continue
				}
				v, err := convertInferred(fields[j].Type, k, row[j], src.text[j], &boxes)
				if err != nil {
					return value.StructType{}, unifyError(ev, ev.Schema.Fields[j].Name, err)
				}
				row[j] = v
			}
		} else {
			row = value.Cut(&slab, len(fields), 256*max(1, len(fields)))
			for j, f := range ev.Schema.Fields {
				if j >= len(ev.Row) || ev.Row[j] == nil {
					continue
				}
				ci := places[j]
				k := src.kind(j)
				if k == kindTyped {
					row[ci] = ev.Row[j]
					continue
				}
				v, err := convertInferred(fields[ci].Type, k, ev.Row[j], src.text[j], &boxes)
				if err != nil {
					return value.StructType{}, unifyError(ev, f.Name, err)
				}
				row[ci] = v
			}
		}
		ev.Schema, ev.Row = out, row
		src.kinds, src.text = nil, nil
		for k, name := range ev.KeyNames {
			if j := columnIndex(out, name); j >= 0 && k < len(ev.KeyValues) {
				ev.KeyNames[k], ev.KeyValues[k] = out.Fields[j].Name, row[j]
			}
		}
	}
	return out, nil
}

// unifyError is the bad record of an event whose payload column col does
// not convert to its unified type.
func unifyError(ev *Event, col string, err error) error {
	src := ev.jsonSrc
	re := &RecordError{File: src.file, Line: src.line, Record: ev.Meta.Record, Kind: ErrBadRecord, Field: "payload." + col}
	var fe *fieldError
	if errors.As(err, &fe) {
		if fe.field != "" {
			re.Field += "." + fe.field
		}
		re.Reason, re.Err = fe.reason, fe.err
	} else {
		re.Reason = err.Error()
	}
	return re
}

// unifiedColumns decides the unified schema and maps every event column
// name to its field index (several names share a field when known matches
// them case-insensitively). plain marks the fields whose inferred values
// all convert to themselves (convertInferred returns them as they are):
// strings and JSON texts of a string column, integers of a long column,
// booleans of a boolean one.
func unifiedColumns(events iter.Seq[*Event], known value.StructType) ([]value.Field, map[string]int, []bool, error) {
	type column struct {
		field   value.Field
		known   bool
		typedBy int64 // record number of the first event a schema typed it in, or 0
		lattice lattice
	}
	var cols []*column
	byName := map[string]int{} // unified field name → index in cols
	for _, f := range known.Fields {
		if _, dup := byName[f.Name]; dup {
			continue
		}
		f.Nullable = true
		byName[f.Name] = len(cols)
		cols = append(cols, &column{field: f, known: true})
	}
	lookup := map[string]int{} // event column name → index in cols
	// The columns of the last schema seen, in cols: events of a file
	// mostly share their decoded schema (see typePayload).
	var (
		schemaOf []value.Field
		places   []int
	)
	for ev := range events {
		src := ev.jsonSrc
		if src == nil {
			continue
		}
		sf := ev.Schema.Fields
		same := sameSlice(sf, schemaOf)
		if !same {
			schemaOf, places = sf, places[:0]
		}
		for j, f := range sf {
			var ci int
			ok := same
			if ok {
				ci = places[j]
			} else {
				ci, ok = lookup[f.Name]
			}
			if !ok {
				if ci, ok = byName[f.Name]; !ok {
					if k := columnIndex(known, f.Name); k >= 0 {
						ci = byName[known.Fields[k].Name]
					} else {
						ci = len(cols)
						byName[f.Name] = ci
						cols = append(cols, &column{field: value.Field{Name: f.Name, Type: value.String, Nullable: true}})
					}
				}
				lookup[f.Name] = ci
			}
			if !same {
				places = append(places, ci)
			}
			c := cols[ci]
			if k := src.kind(j); k != kindTyped {
				if j < len(ev.Row) {
					c.lattice.add(k, ev.Row[j], src.text[j])
				}
				continue
			}
			bad := func(reason string) error {
				return &RecordError{File: src.file, Line: src.line, Record: ev.Meta.Record, Kind: ErrBadRecord, Field: "payload." + f.Name, Reason: reason}
			}
			switch {
			case c.typedBy != 0:
				if !value.Equal(c.field.Type, f.Type) {
					return nil, nil, nil, bad(fmt.Sprintf("typed %s here but %s in record %d", f.Type, c.field.Type, c.typedBy))
				}
			case c.known && !value.Equal(c.field.Type, f.Type):
				return nil, nil, nil, bad(fmt.Sprintf("typed %s by the decoding schema but %s by the known schema", f.Type, c.field.Type))
			default:
				c.typedBy = max(ev.Meta.Record, 1)
				c.field.Type = f.Type
			}
		}
	}
	fields := make([]value.Field, len(cols))
	plain := make([]bool, len(cols))
	for i, c := range cols {
		switch {
		case !c.known && c.typedBy == 0:
			c.field.Type = c.lattice.decide()
		case c.known && c.typedBy == 0 && c.lattice.votes() > 0:
			// Values wider than the known type (a fraction in a long
			// column, more decimal places) take the widened type; the
			// table widens with them instead of rejecting the file.
			if w, ok := value.Widen(c.field.Type, c.lattice.decide()); ok {
				c.field.Type = w
			}
		}
		fields[i] = c.field
		plain[i] = c.lattice.plainAs(c.field.Type)
	}
	return fields, lookup, plain, nil
}

// kind is how the value at Row index j was written (kindTyped once typed).
func (s *jsonSource) kind(j int) rawKind {
	if j < len(s.kinds) {
		return s.kinds[j]
	}
	return kindTyped
}

// lattice accumulates the kinds of a column's inferred values.
type lattice struct {
	bools, numbers, strs, nested int // nulls do not vote
	// Numbers.
	fraction   bool // some number has a fraction or an exponent
	beyondLong bool // some integer does not fit int64
	tooWide    bool // some number needs more than 38 digits
	intDigits  int  // most digits left of the point
	scale      int  // most fraction digits
	// Strings.
	notTimestamp, notDate bool
}

// plainAs reports whether every value the lattice saw is, as inferred,
// already a value of type t: convertInferred returns it as it is.
func (l *lattice) plainAs(t value.Type) bool {
	switch t {
	case value.String:
		return l.numbers == 0 && l.bools == 0 // strings and JSON texts
	case value.Long:
		return l.bools == 0 && l.strs == 0 && l.nested == 0 && !l.fraction && !l.beyondLong && !l.tooWide // int64s
	case value.Boolean:
		return l.numbers == 0 && l.strs == 0 && l.nested == 0
	}
	return l.votes() == 0
}

// votes counts the non-null values seen.
func (l *lattice) votes() int { return l.bools + l.numbers + l.strs + l.nested }

func (l *lattice) add(k rawKind, v any, text string) {
	switch k {
	case kindBool:
		l.bools++
	case kindNested:
		l.nested++
	case kindString:
		l.strs++
		s, _ := v.(string)
		if !l.notTimestamp {
			if _, ok := strictTimestamp(s); !ok {
				l.notTimestamp = true
			}
		}
		if !l.notDate {
			if _, ok := strictDate(s); !ok {
				l.notDate = true
			}
		}
	case kindNumber:
		l.numbers++
		if v == nil {
			return
		}
		integer := integerNumber(v, text)
		if !integer {
			l.fraction = true
		}
		switch x := v.(type) {
		case int64:
			l.intDigits = max(l.intDigits, len(strconv.FormatUint(absInt(x), 10)))
		case value.Decimal:
			if integer {
				l.beyondLong = true
			}
			l.intDigits = max(l.intDigits, x.Precision()-x.Scale)
			l.scale = max(l.scale, x.Scale)
		default: // beyond 38 digits: the Reader kept its text
			l.tooWide = true
		}
	}
}

// integerNumber is isIntegerText of a number's text (text, or numberText(v)
// when it is empty), without rendering an int64's or a decimal's text.
func integerNumber(v any, text string) bool {
	if text == "" {
		switch x := v.(type) {
		case int64:
			return true
		case value.Decimal: // Decimal.String has a point exactly when Scale > 0
			return x.Unscaled == nil || x.Scale <= 0
		}
		text = numberText(v)
	}
	return isIntegerText(text)
}

func absInt(n int64) uint64 {
	if n < 0 {
		return uint64(-(n + 1)) + 1
	}
	return uint64(n)
}

// decide applies the lattice documented on UnifyJSON.
func (l *lattice) decide() value.Type {
	kinds := 0
	for _, n := range []int{l.bools, l.numbers, l.strs, l.nested} {
		if n > 0 {
			kinds++
		}
	}
	if kinds != 1 {
		return value.String // all null, or kinds mixed
	}
	switch {
	case l.bools > 0:
		return value.Boolean
	case l.numbers > 0:
		switch {
		case l.tooWide || l.intDigits+l.scale > maxDecimalDigits:
			return value.String
		case l.fraction:
			return value.DecimalType{Precision: maxDecimalDigits, Scale: l.scale}
		case !l.beyondLong:
			return value.Long
		case l.intDigits <= unsignedBigintDigits:
			return value.DecimalType{Precision: unsignedBigintDigits}
		}
		return value.DecimalType{Precision: maxDecimalDigits}
	case l.strs > 0:
		switch {
		case !l.notDate:
			return value.Date
		case !l.notTimestamp:
			return value.Timestamp
		}
	}
	return value.String
}

// numberText renders an inferred number value back to its JSON text.
func numberText(v any) string {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10)
	case value.Decimal:
		return x.String()
	case string:
		return x
	}
	return fmt.Sprint(v)
}

// convertInferred converts a value the Reader inferred (of kind k, with its
// exact number text when it differs from the value) to the unified type t.
// The common cases convert directly; the rest go through convertJSON so
// that the result and any error are those of Options.Schemas typing.
//
// A number's text is rendered only where it is used (numberTextOf): most
// numbers convert directly, and rendering a decimal costs more than
// converting it.
//
// A value that is already of its type is returned in the interface it came
// in; a new one is boxed from al, whose slabs live and die with the events
// as the decoder's own do.
func convertInferred(t value.Type, k rawKind, v any, text string, al *slabs) (any, error) {
	switch tt := t.(type) {
	case value.Primitive:
		switch tt {
		case value.String:
			switch k {
			case kindString, kindNested:
				return v, nil
			case kindNumber:
				return numberTextOf(v, text), nil
			case kindBool:
				return strconv.FormatBool(v.(bool)), nil
			}
		case value.Long:
			if _, ok := v.(int64); ok {
				return v, nil
			}
		case value.Boolean:
			if _, ok := v.(bool); ok {
				return v, nil
			}
		case value.Timestamp, value.TimestampNTZ:
			if s, ok := v.(string); ok && k == kindString {
				if us, ok := strictTimestamp(s); ok {
					if tt == value.TimestampNTZ {
						return al.local.Box(value.LocalMicros(us)), nil
					}
					return al.boxMicros(us), nil
				}
			}
		case value.Date:
			if s, ok := v.(string); ok && k == kindString {
				if d, ok := strictDate(s); ok {
					return al.days.Box(d), nil
				}
			}
		}
	case value.DecimalType:
		// An inferred int64 or Decimal holds the number exactly, so this is
		// toDecimal without reparsing the text.
		var d value.Decimal
		switch x := v.(type) {
		case int64:
			d = value.Decimal{Unscaled: big.NewInt(x)}
		case value.Decimal:
			d = x
		}
		if d.Unscaled != nil {
			if r, err := d.Rescale(tt.Scale); err == nil && (r.Precision() <= tt.Precision || r.Unscaled.Sign() == 0) {
				if x, ok := v.(value.Decimal); ok && x == r {
					return v, nil // of the column's scale already
				}
				return al.boxDecimal(r), nil
			}
		}
	}
	if k == kindNumber {
		text = numberTextOf(v, text)
	}
	return convertJSON(t, inferredJSON(k, v, text))
}

// numberTextOf is a number's exact text: text when the Reader kept it
// (it differs from the value's), else the value's.
func numberTextOf(v any, text string) string {
	if text == "" {
		return numberText(v)
	}
	return text
}

// inferredJSON rebuilds the JSON text of an inferred value.
func inferredJSON(k rawKind, v any, text string) []byte {
	switch k {
	case kindNumber:
		return []byte(text)
	case kindBool:
		return strconv.AppendBool(nil, v.(bool))
	case kindNested:
		s, _ := v.(string)
		return []byte(s)
	case kindString:
		s, _ := v.(string)
		b, _ := value.AppendJSON(nil, value.String, s)
		return b
	}
	return []byte("null")
}

// strictTimestamp parses an ISO-8601 timestamp in the strict form UnifyJSON
// types as timestamp: YYYY-MM-DD, T or a space, HH:MM:SS, optionally a
// fraction of 1 to 9 digits, then Z, an offset ±HH, ±HHMM or ±HH:MM, or
// nothing (UTC).
func strictTimestamp(s string) (value.Micros, bool) {
	if len(s) < 19 || !dateShape(s[:10]) || (s[10] != 'T' && s[10] != ' ') ||
		!digits(s[11:13]) || s[13] != ':' || !digits(s[14:16]) || s[16] != ':' || !digits(s[17:19]) {
		return 0, false
	}
	rest := s[19:]
	if strings.HasPrefix(rest, ".") {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 1 || n > 10 {
			return 0, false
		}
		rest = rest[n:]
	}
	switch {
	case rest == "" || rest == "Z":
	case rest[0] == '+' || rest[0] == '-':
		z := rest[1:]
		ok := (len(z) == 2 && digits(z)) || (len(z) == 4 && digits(z)) || (len(z) == 5 && digits(z[:2]) && z[2] == ':' && digits(z[3:]))
		if !ok {
			return 0, false
		}
	default:
		return 0, false
	}
	// Most timestamps are UTC: read without building a time.Time.
	if us, ok := fastMicros(s); ok {
		return us, true
	}
	t, _, err := parseTimestamp(s)
	if err != nil {
		return 0, false
	}
	return value.MicrosOf(t), true
}

// strictDate parses a date written exactly YYYY-MM-DD.
func strictDate(s string) (value.Days, bool) {
	if len(s) != 10 || !dateShape(s) {
		return 0, false
	}
	t, _, err := parseTimestamp(s)
	if err != nil {
		return 0, false
	}
	return value.DaysOf(t), true
}

func dateShape(s string) bool {
	return len(s) == 10 && digits(s[:4]) && s[4] == '-' && digits(s[5:7]) && s[7] == '-' && digits(s[8:10])
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// sameSlice reports whether a and b are the same slice of fields (one
// decoded schema that events share, see typePayload), not only equal ones.
func sameSlice(a, b []value.Field) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
