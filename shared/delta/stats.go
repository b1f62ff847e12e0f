package delta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dsdelta/dsdelta/shared/value"
)

// Per-file statistics (add.stats), collected the way Spark collects them:
// numRecords; min/max for numeric, decimal, date, timestamp, timestamp_ntz
// and string leaves (strings truncated to a 32-character prefix); nullCount
// for every leaf, with arrays and maps counted as one leaf; only the first
// N leaf columns of the data schema (partition columns excluded).

// DefaultStatsColumns is Spark's delta.dataSkippingNumIndexedCols default.
const DefaultStatsColumns = 32

// statsStringPrefix is Spark's delta.dataSkippingStringPrefixLength default,
// in UTF-16 code units.
const statsStringPrefix = 32

// statsNode mirrors one schema field that has statistics.
type statsNode struct {
	key      string     // name in the stats JSON (physical name)
	index    int        // position of the field in its parent struct value
	pos      int        // of a root: its position among the data fields
	typ      value.Type // Delta type
	children []*statsNode

	nulls    int64
	minMax   bool // whether min/max are collected for this leaf
	min, max any
	// minI and maxI are min and max as int64 when they are of an integer
	// kind (addInt).
	minI, maxI int64
	hasNaN     bool
	// unbounded: some values were added without bounds (see leafSummary),
	// so min and max are omitted.
	unbounded bool
}

// statsCollector accumulates statistics over the rows of one data file.
type statsCollector struct {
	numRecords int64
	roots      []*statsNode // top-level data fields, indexed into the full row
	// perRow are the roots add looks at: all of them, but for those a
	// FileWriter reads from the footer it writes (see footerStat).
	perRow []*statsNode
}

// newStatsCollector builds the collector for the data fields (given by
// their index in the row) that spec chooses (statscols.go).
func newStatsCollector(schema value.StructType, dataFields []int, spec statsSpec, mode string) *statsCollector {
	budget := spec.count
	c := &statsCollector{}
	for pos, i := range dataFields {
		f := schema.Fields[i]
		var n *statsNode
		if spec.byName {
			n = buildNamedStatsNode(f, i, spec.paths, mode)
		} else {
			n = buildStatsNode(f, i, &budget, mode)
		}
		if n != nil {
			n.pos = pos
			c.roots = append(c.roots, n)
		}
	}
	c.perRow = c.roots
	return c
}

func buildStatsNode(f value.Field, index int, budget *int, mode string) *statsNode {
	if *budget == 0 {
		return nil
	}
	n := &statsNode{key: PhysicalName(f, mode), index: index, typ: f.Type}
	if st, ok := f.Type.(value.StructType); ok {
		for i, cf := range st.Fields {
			if c := buildStatsNode(cf, i, budget, mode); c != nil {
				n.children = append(n.children, c)
			}
		}
		if len(n.children) == 0 {
			return nil
		}
		return n
	}
	if *budget > 0 {
		*budget--
	}
	n.minMax = hasMinMax(f.Type)
	return n
}

// hasMinMax reports whether Spark collects min/max for a leaf of type t.
func hasMinMax(t value.Type) bool {
	switch t.(type) {
	case value.DecimalType:
		return true
	case value.Primitive:
		switch t {
		case value.Boolean, value.Binary:
			return false
		}
		return true
	}
	return false
}

func (c *statsCollector) add(row []any) {
	c.numRecords++
	for _, n := range c.perRow {
		n.add(row[n.index])
	}
}

// leafSummary describes one leaf column over rows whose values are not seen
// one by one (a row group copied verbatim from another file).
type leafSummary struct {
	nulls int64
	// min and max bound the non-null values; both are nil when every value
	// is null.
	min, max any
	// unbounded marks non-null values whose bounds are unknown: the file's
	// min and max of the column are then omitted.
	unbounded bool
}

// addSummary counts rows summarised by leaves, one per data field of a
// flat schema (a root takes the leaf at its pos; the leaves of columns
// without statistics are ignored).
func (c *statsCollector) addSummary(rows int64, leaves []leafSummary) {
	c.numRecords += rows
	for _, n := range c.roots {
		if n.pos < len(leaves) {
			n.addSummary(leaves[n.pos])
		}
	}
}

func (n *statsNode) addSummary(s leafSummary) {
	n.nulls += s.nulls
	if !n.minMax {
		return
	}
	if s.unbounded || isNaNValue(s.min) || isNaNValue(s.max) {
		n.unbounded = true
		return
	}
	if s.min != nil && (n.min == nil || compareStat(s.min, n.min) < 0) {
		n.min = n.detach(s.min)
		n.minI, _ = intStat(n.min)
	}
	if s.max != nil && (n.max == nil || compareStat(s.max, n.max) > 0) {
		n.max = n.detach(s.max)
		n.maxI, _ = intStat(n.max)
	}
}

// intStat is v as addInt compares it, when v is of an integer kind it
// takes.
func intStat(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case value.Micros:
		return int64(x), true
	case value.Days:
		return int64(x), true
	case value.LocalMicros:
		return int64(x), true
	}
	return 0, false
}

func isNaNValue(v any) bool {
	switch f := v.(type) {
	case float32:
		return math.IsNaN(float64(f))
	case float64:
		return math.IsNaN(f)
	}
	return false
}

func (n *statsNode) add(v any) {
	if n.children != nil {
		var fields []any
		if v != nil {
			fields, _ = v.([]any)
		}
		for _, c := range n.children {
			var cv any
			if fields != nil {
				cv = fields[c.index]
			}
			c.add(cv)
		}
		return
	}
	if v == nil {
		n.nulls++
		return
	}
	if !n.minMax {
		return
	}
	// Strings and integer kinds compare as themselves, without
	// compareStat's switch: a value below the minimum cannot also be above
	// the maximum.
	if x, ok := v.(string); ok {
		switch {
		case n.min == nil:
			n.min, n.max = v, v
		case x < n.min.(string):
			n.min = v
		case x > n.max.(string):
			n.max = v
		}
		return
	}
	if x, ok := intStat(v); ok {
		n.addInt(x, v)
		return
	}
	switch x := v.(type) {
	case float32:
		if math.IsNaN(float64(x)) {
			n.hasNaN = true
			return
		}
	case float64:
		if math.IsNaN(x) {
			n.hasNaN = true
			return
		}
	}
	if n.min == nil || compareStat(v, n.min) < 0 {
		n.min = n.detach(v)
	}
	if n.max == nil || compareStat(v, n.max) > 0 {
		n.max = n.detach(v)
	}
}

// addInt takes a value of an integer kind, x being it as an int64 and v
// as given; minI and maxI mirror min and max.
func (n *statsNode) addInt(x int64, v any) {
	switch {
	case n.min == nil:
		n.min, n.max, n.minI, n.maxI = v, v, x, x
	case x < n.minI:
		n.min, n.minI = v, x
	case x > n.maxI:
		n.max, n.maxI = v, x
	}
}

// detach copies a bound out of the caller's row (a decimal shares a
// *big.Int the caller may reuse after Write returns) and brings decimals to
// the column's scale, which the stats JSON number must show.
func (n *statsNode) detach(v any) any {
	d, ok := v.(value.Decimal)
	if !ok {
		return v
	}
	if dt, ok := n.typ.(value.DecimalType); ok {
		if r, err := d.Rescale(dt.Scale); err == nil {
			d = r
		}
	}
	return value.Decimal{Unscaled: new(big.Int).Set(d.Unscaled), Scale: d.Scale}
}

// compareStat orders two non-null values of the same leaf type.
func compareStat(a, b any) int {
	switch x := a.(type) {
	case int8:
		return cmpOrdered(x, b.(int8))
	case int16:
		return cmpOrdered(x, b.(int16))
	case int32:
		return cmpOrdered(x, b.(int32))
	case int64:
		return cmpOrdered(x, b.(int64))
	case float32:
		return cmpOrdered(x, b.(float32))
	case float64:
		return cmpOrdered(x, b.(float64))
	case value.Days:
		return cmpOrdered(x, b.(value.Days))
	case value.Micros:
		return cmpOrdered(x, b.(value.Micros))
	case value.LocalMicros:
		return cmpOrdered(x, b.(value.LocalMicros))
	case string:
		return strings.Compare(x, b.(string))
	case value.Decimal:
		return x.Cmp(b.(value.Decimal))
	}
	return 0
}

func cmpOrdered[T int8 | int16 | int32 | int64 | float32 | float64 | value.Days | value.Micros | value.LocalMicros](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// json renders the stats object.
func (c *statsCollector) json() string {
	b := []byte(`{"numRecords":`)
	b = strconv.AppendInt(b, c.numRecords, 10)
	b = append(b, `,"minValues":`...)
	b = appendStatsObject(b, c.roots, statMin)
	b = append(b, `,"maxValues":`...)
	b = appendStatsObject(b, c.roots, statMax)
	b = append(b, `,"nullCount":`...)
	b = appendStatsObject(b, c.roots, statNulls)
	b = append(b, '}')
	return string(b)
}

type statKind int

const (
	statMin statKind = iota
	statMax
	statNulls
)

func appendStatsObject(b []byte, nodes []*statsNode, kind statKind) []byte {
	b = append(b, '{')
	first := true
	for _, n := range nodes {
		var val []byte
		if n.children != nil {
			inner := appendStatsObject(nil, n.children, kind)
			if kind != statNulls && len(inner) == 2 {
				continue // no bounds below this struct
			}
			val = inner
		} else {
			var ok bool
			if val, ok = n.leafJSON(kind); !ok {
				continue
			}
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, n.key)
		b = append(b, ':')
		b = append(b, val...)
	}
	return append(b, '}')
}

// leafJSON renders one statistic of a leaf; ok is false when it is omitted.
func (n *statsNode) leafJSON(kind statKind) ([]byte, bool) {
	if kind == statNulls {
		return strconv.AppendInt(nil, n.nulls, 10), true
	}
	if n.unbounded {
		return nil, false
	}
	v := n.min
	if kind == statMax {
		if n.hasNaN {
			// NaN sorts above every number in Spark, so no finite max bounds it.
			return nil, false
		}
		v = n.max
	}
	if v == nil {
		return nil, false
	}
	switch x := v.(type) {
	case int8:
		return strconv.AppendInt(nil, int64(x), 10), true
	case int16:
		return strconv.AppendInt(nil, int64(x), 10), true
	case int32:
		return strconv.AppendInt(nil, int64(x), 10), true
	case int64:
		return strconv.AppendInt(nil, x, 10), true
	case float32:
		if !isFinite(float64(x)) {
			return nil, false
		}
		return appendJavaFloat(nil, float64(x), 32), true
	case float64:
		if !isFinite(x) {
			return nil, false
		}
		return appendJavaFloat(nil, x, 64), true
	case value.Decimal:
		return []byte(x.String()), true
	case value.Days:
		return appendJSONString(nil, x.String()), true
	case value.Micros:
		return appendJSONString(nil, x.Time().Format("2006-01-02T15:04:05.000Z07:00")), true
	case value.LocalMicros:
		return appendJSONString(nil, value.Micros(x).Time().Format("2006-01-02T15:04:05.000")), true
	case string:
		if kind == statMin {
			return appendJSONString(nil, truncateMinString(x)), true
		}
		m, ok := truncateMaxString(x)
		if !ok {
			return nil, false
		}
		return appendJSONString(nil, m), true
	}
	return nil, false
}

// utf16Cut returns the byte offset in s after at most n UTF-16 code units,
// never splitting a surrogate pair, and whether s is longer than that.
func utf16Cut(s string, n int) (int, bool) {
	units := 0
	for i, r := range s {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if units+w > n {
			return i, true
		}
		units += w
	}
	return len(s), false
}

// truncateMinString is Spark's min prefix: a prefix is never greater.
func truncateMinString(s string) string {
	cut, _ := utf16Cut(s, statsStringPrefix)
	return s[:cut]
}

// truncateMaxString is Spark's max prefix: the 32-unit prefix followed by a
// tie-breaker that sorts above the rest of the string (U+007F when the next
// character is ASCII below it, else U+10FFFF), extending the prefix up to
// 64 units when the next character is U+10FFFF itself; ok is false when no
// such prefix exists and max must be omitted.
func truncateMaxString(s string) (string, bool) {
	cut, longer := utf16Cut(s, statsStringPrefix)
	if !longer {
		return s, true
	}
	limit, _ := utf16Cut(s, 2*statsStringPrefix)
	for cut <= limit && cut < len(s) {
		next, size := utf8.DecodeRuneInString(s[cut:])
		switch {
		case next < 0x7F:
			return s[:cut] + "\x7f", true
		case next < utf8.MaxRune:
			return s[:cut] + string(utf8.MaxRune), true
		}
		cut += size
	}
	return "", false
}

// appendJavaFloat formats f as Java's Float/Double.toString does, which is
// how Spark writes floating-point stats and partition values: "1.0",
// "0.001", "1.0E7", "1.5E-4".
func appendJavaFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, 1):
		return append(b, "Infinity"...)
	case math.IsInf(f, -1):
		return append(b, "-Infinity"...)
	case f == 0:
		if math.Signbit(f) {
			return append(b, "-0.0"...)
		}
		return append(b, "0.0"...)
	}
	abs := math.Abs(f)
	if f < 0 {
		b = append(b, '-')
	}
	if abs >= 1e-3 && abs < 1e7 {
		s := strconv.FormatFloat(abs, 'f', -1, bits)
		b = append(b, s...)
		if !strings.Contains(s, ".") {
			b = append(b, ".0"...)
		}
		return b
	}
	e := strconv.FormatFloat(abs, 'e', -1, bits) // d.ddde±xx
	mant, exp, _ := strings.Cut(e, "e")
	b = append(b, mant...)
	if !strings.Contains(mant, ".") {
		b = append(b, ".0"...)
	}
	b = append(b, 'E')
	n, _ := strconv.Atoi(exp)
	return strconv.AppendInt(b, int64(n), 10)
}

// appendJSONString writes s as a JSON string without HTML escaping;
// invalid UTF-8 becomes U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\ufffd"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// Stats is add.stats parsed: the raw JSON of each column's bounds and null
// count, keyed as in the file (physical names under column mapping; nested
// structs are JSON objects).
type Stats struct {
	NumRecords  int64                      `json:"numRecords"`
	MinValues   map[string]json.RawMessage `json:"minValues,omitempty"`
	MaxValues   map[string]json.RawMessage `json:"maxValues,omitempty"`
	NullCount   map[string]json.RawMessage `json:"nullCount,omitempty"`
	TightBounds *bool                      `json:"tightBounds,omitempty"`
}

// ParseStats parses an add.stats JSON string.
func ParseStats(s string) (Stats, error) {
	var st Stats
	if strings.TrimSpace(s) == "" {
		return st, fmt.Errorf("parse stats: empty")
	}
	if err := json.Unmarshal([]byte(s), &st); err != nil {
		return Stats{}, fmt.Errorf("parse stats: %w", err)
	}
	return st, nil
}

// NullCountOf returns the null count of a top-level leaf column.
func (s Stats) NullCountOf(col string) (int64, bool) {
	raw, ok := s.NullCount[col]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	return n, err == nil
}

// MinMax returns the bounds of a top-level column (named as in the stats,
// i.e. by physical name under column mapping) as values of type t in the
// shared/value representation; ok is false unless both bounds are present
// and parse. The bounds are safe for pruning: every value in the file lies
// in [min, max]. Because Delta truncates timestamps in stats to
// milliseconds, the max of a timestamp or timestamp_ntz column is widened by
// 999µs; decimals written with more digits than the scale are rounded
// outwards.
func (s Stats) MinMax(col string, t value.Type) (min, max any, ok bool) {
	rawMin, ok1 := s.MinValues[col]
	rawMax, ok2 := s.MaxValues[col]
	if !ok1 || !ok2 {
		return nil, nil, false
	}
	lo, err := parseStatValue(rawMin, t, false)
	if err != nil {
		return nil, nil, false
	}
	hi, err := parseStatValue(rawMax, t, true)
	if err != nil {
		return nil, nil, false
	}
	return lo, hi, true
}

// parseStatValue converts one raw stats bound to t; upper selects the
// rounding direction for values that are not exact at t's precision.
func parseStatValue(raw json.RawMessage, t value.Type, upper bool) (any, error) {
	text := string(bytes.TrimSpace(raw))
	if text == "null" || text == "" {
		return nil, fmt.Errorf("null bound")
	}
	if dt, ok := t.(value.DecimalType); ok {
		num := strings.Trim(text, `"`)
		if i := strings.IndexAny(num, "eE"); i >= 0 {
			// big.Rat would expand any exponent; no decimal(38) bound needs
			// more than a few hundred digits.
			if e, err := strconv.Atoi(num[i+1:]); err != nil || e > 400 || e < -400 {
				return nil, fmt.Errorf("decimal bound %s: exponent out of range", text)
			}
		}
		var r big.Rat
		if _, ok := r.SetString(num); !ok {
			return nil, fmt.Errorf("decimal bound %s", text)
		}
		scaled := new(big.Rat).Mul(&r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(dt.Scale)), nil)))
		q, m := new(big.Int).DivMod(scaled.Num(), scaled.Denom(), new(big.Int))
		if upper && m.Sign() != 0 {
			q.Add(q, big.NewInt(1))
		}
		return value.Decimal{Unscaled: q, Scale: dt.Scale}, nil
	}
	p, ok := t.(value.Primitive)
	if !ok {
		return nil, fmt.Errorf("no bounds for %v", t)
	}
	var str string
	if p == value.String || p == value.Date || p == value.Timestamp || p == value.TimestampNTZ {
		if err := json.Unmarshal(raw, &str); err != nil {
			return nil, err
		}
	}
	switch p {
	case value.String:
		return str, nil
	case value.Byte, value.Short, value.Integer, value.Long:
		return value.ParseInteger(p, text)
	case value.Float:
		f, err := strconv.ParseFloat(text, 32)
		return float32(f), err
	case value.Double:
		f, err := strconv.ParseFloat(text, 64)
		return f, err
	case value.Date:
		d, err := time.Parse("2006-01-02", str)
		if err != nil {
			return nil, err
		}
		return value.DaysOf(d), nil
	case value.Timestamp, value.TimestampNTZ:
		ts, err := parsePartitionTime(str, p == value.Timestamp)
		if err != nil {
			return nil, err
		}
		us := value.MicrosOf(ts)
		if upper {
			us += 999
		}
		if p == value.TimestampNTZ {
			return value.LocalMicros(us), nil
		}
		return us, nil
	}
	return nil, fmt.Errorf("no bounds for %v", t)
}
