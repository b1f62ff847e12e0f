package delta

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dsdelta/dsdelta/shared/value"
)

// Which columns get statistics. PROTOCOL.md "Per-file Statistics" makes
// every per-column statistic optional: the writer chooses. Spark chooses
// by two table properties (DeltaConfigs, StatisticsCollection), which
// delta-rs and the Delta kernels follow as well:
//
//   - delta.dataSkippingStatsColumns, when set, lists the columns by
//     logical name, comma-separated; a nested field is a dotted path
//     (addr.zip), a name part with other characters than letters, digits
//     and underscores is quoted in backticks (`a.dot`, a backtick doubled),
//     as Spark's SQL parser reads a multipart identifier list; names match
//     case-insensitively; a struct stands for all its leaves. It takes
//     precedence over
//   - delta.dataSkippingNumIndexedCols: the first N leaf columns of the data
//     schema (partition columns excluded), default 32, -1 for all.
//
// Spark refuses a list that names a partition column, or a column whose
// type has no min/max (boolean, binary, arrays, maps): StatsColumnsFor never
// writes one.

// Table properties that choose the columns with statistics.
const (
	PropDataSkippingStatsColumns   = "delta.dataSkippingStatsColumns"
	PropDataSkippingNumIndexedCols = "delta.dataSkippingNumIndexedCols"
)

// statsSpec is a table's choice of columns with statistics.
type statsSpec struct {
	byName bool
	// names are the listed columns as written, paths the same lower-cased
	// (matched against lower-cased field names), when byName.
	names, paths [][]string
	// count is how many leaf columns, when not byName; -1 is all.
	count int
}

// statsSpecOf reads the choice from a table's properties.
func statsSpecOf(conf map[string]string) (statsSpec, error) {
	if s, ok := conf[PropDataSkippingStatsColumns]; ok {
		names, err := parseStatsColumns(s)
		if err != nil {
			return statsSpec{}, fmt.Errorf("table property %s=%q: %w", PropDataSkippingStatsColumns, s, err)
		}
		spec := statsSpec{byName: true, names: names}
		for _, n := range names {
			p := make([]string, len(n))
			for i, part := range n {
				p[i] = strings.ToLower(part)
			}
			spec.paths = append(spec.paths, p)
		}
		return spec, nil
	}
	spec := statsSpec{count: DefaultStatsColumns}
	if s, ok := conf[PropDataSkippingNumIndexedCols]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < -1 {
			return statsSpec{}, fmt.Errorf("table property %s=%q: not an integer of -1 or more", PropDataSkippingNumIndexedCols, s)
		}
		spec.count = n
	}
	return spec, nil
}

// writeStatsSpec is the choice a FileWriter makes: WriteOptions.StatsColumns
// when set, the table's properties otherwise.
func writeStatsSpec(opts WriteOptions) (statsSpec, error) {
	if opts.StatsColumns != 0 {
		return statsSpec{count: opts.StatsColumns}, nil
	}
	return statsSpecOf(opts.Configuration)
}

// parseStatsColumns parses a delta.dataSkippingStatsColumns value: a
// comma-separated list of dotted paths whose parts may be quoted in
// backticks. Blank is the empty list.
func parseStatsColumns(s string) ([][]string, error) {
	var out [][]string
	var path []string
	var part strings.Builder
	quoted := false // the part was quoted: it may be empty, nothing may follow
	end := func() error {
		p := strings.TrimSpace(part.String())
		if quoted {
			p = part.String()
		}
		if p == "" && !quoted {
			return fmt.Errorf("empty column name part in %q", s)
		}
		if !quoted && strings.ContainsAny(p, " \t\n\r") {
			return fmt.Errorf("column name %q must be quoted in backticks", p)
		}
		path = append(path, p)
		part.Reset()
		quoted = false
		return nil
	}
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '`':
			if quoted || strings.TrimSpace(part.String()) != "" {
				return nil, fmt.Errorf("misplaced backtick at offset %d of %q", i, s)
			}
			part.Reset()
			j := i + 1
			for ; j < len(s); j++ {
				if s[j] == '`' {
					if j+1 < len(s) && s[j+1] == '`' {
						part.WriteByte('`')
						j++
						continue
					}
					break
				}
				part.WriteByte(s[j])
			}
			if j == len(s) {
				return nil, fmt.Errorf("unterminated backtick in %q", s)
			}
			quoted = true
			i = j
		case c == '.' || c == ',':
			if err := end(); err != nil {
				return nil, err
			}
			if c == ',' {
				out = append(out, path)
				path = nil
			}
		case quoted:
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				return nil, fmt.Errorf("unexpected %q after a quoted name in %q", c, s)
			}
		default:
			part.WriteByte(c)
		}
	}
	if err := end(); err != nil {
		return nil, err
	}
	return append(out, path), nil
}

// formatStatsColumns renders paths as parseStatsColumns reads them,
// quoting the parts Spark's parser would not read unquoted.
func formatStatsColumns(paths [][]string) string {
	var b strings.Builder
	for i, p := range paths {
		if i > 0 {
			b.WriteByte(',')
		}
		for j, part := range p {
			if j > 0 {
				b.WriteByte('.')
			}
			if plainIdentifier(part) {
				b.WriteString(part)
			} else {
				b.WriteString("`" + strings.ReplaceAll(part, "`", "``") + "`")
			}
		}
	}
	return b.String()
}

// plainIdentifier reports whether Spark's SQL lexer reads s as one
// identifier unquoted: ASCII letters, digits and underscores, not starting
// with a digit (which it could read as a number).
func plainIdentifier(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// buildNamedStatsNode is buildStatsNode for a list of columns: f (at index
// in its parent) with the leaves of it that paths (lower-cased, relative to
// f's parent) name, or nil when they name none.
func buildNamedStatsNode(f value.Field, index int, paths [][]string, mode string) *statsNode {
	name := strings.ToLower(f.Name)
	var rest [][]string
	for _, p := range paths {
		if len(p) == 0 || p[0] != name {
			continue
		}
		if len(p) == 1 {
			all := -1
			return buildStatsNode(f, index, &all, mode)
		}
		rest = append(rest, p[1:])
	}
	st, ok := f.Type.(value.StructType)
	if !ok || len(rest) == 0 {
		return nil
	}
	n := &statsNode{key: PhysicalName(f, mode), index: index, typ: f.Type}
	for i, cf := range st.Fields {
		if c := buildNamedStatsNode(cf, i, rest, mode); c != nil {
			n.children = append(n.children, c)
		}
	}
	if len(n.children) == 0 {
		return nil
	}
	return n
}

// StatsColumnsFor returns the delta.dataSkippingStatsColumns value under
// which the top-level columns need of a table (its logical schema,
// partition columns and properties conf) get statistics, and the columns
// conf gives statistics keep them; changed is false when conf already does
// that, and then prop is "". need columns that are partition columns, absent,
// or of a type without min/max are passed over.
//
// Without the property, prop lists the needed columns and the
// eligible ones among the first delta.dataSkippingNumIndexedCols leaves, in
// schema order. With it, prop is the property's list, less the
// columns the schema no longer has, plus the needed columns it lacks.
func StatsColumnsFor(schema value.StructType, partitionColumns []string, conf map[string]string, need []string) (prop string, changed bool, err error) {
	spec, err := statsSpecOf(conf)
	if err != nil {
		return "", false, err
	}
	data := dataFieldsOf(schema, partitionColumns)
	needed := map[string]bool{}
	var missing [][]string
	for _, name := range need {
		pos := slices.IndexFunc(data, func(f value.Field) bool { return strings.EqualFold(f.Name, name) })
		if pos < 0 || !hasMinMax(data[pos].Type) {
			continue
		}
		needed[strings.ToLower(data[pos].Name)] = true
		if !spec.covers(data, pos) {
			missing = append(missing, []string{data[pos].Name})
		}
	}
	if !spec.byName {
		if len(missing) == 0 {
			return "", false, nil
		}
		return formatStatsColumns(firstStatsPaths(data, spec.count, needed)), true, nil
	}
	var kept [][]string
	for i, p := range spec.paths {
		if resolvesIn(data, p) {
			kept = append(kept, spec.names[i])
		}
	}
	if len(missing) == 0 && len(kept) == len(spec.names) {
		return "", false, nil
	}
	return formatStatsColumns(append(kept, missing...)), true, nil
}

// dataFieldsOf are the fields of schema stored in data files.
func dataFieldsOf(schema value.StructType, partitionColumns []string) []value.Field {
	var out []value.Field
	for _, f := range schema.Fields {
		if !slices.ContainsFunc(partitionColumns, func(p string) bool { return strings.EqualFold(p, f.Name) }) {
			out = append(out, f)
		}
	}
	return out
}

// covers reports whether data[pos], a top-level leaf, gets statistics.
func (s statsSpec) covers(data []value.Field, pos int) bool {
	if s.byName {
		name := strings.ToLower(data[pos].Name)
		return slices.ContainsFunc(s.paths, func(p []string) bool { return len(p) == 1 && p[0] == name })
	}
	if s.count < 0 {
		return true
	}
	leaves := 0
	for _, f := range data[:pos] {
		leaves += leafCount(f.Type)
	}
	return leaves < s.count
}

// leafCount is how many leaf columns a field of type t counts for
// delta.dataSkippingNumIndexedCols: a struct its leaves, anything else one.
func leafCount(t value.Type) int {
	st, ok := t.(value.StructType)
	if !ok {
		return 1
	}
	n := 0
	for _, f := range st.Fields {
		n += leafCount(f.Type)
	}
	return n
}

// firstStatsPaths lists, in schema order, the paths of the leaves of data
// with min/max among its first count leaves (-1: all) and the top-level
// columns needed names (lower-cased).
func firstStatsPaths(data []value.Field, count int, needed map[string]bool) [][]string {
	var out [][]string
	leaves := 0
	var walk func(prefix []string, f value.Field, top bool)
	walk = func(prefix []string, f value.Field, top bool) {
		path := append(slices.Clone(prefix), f.Name)
		if st, ok := f.Type.(value.StructType); ok {
			for _, cf := range st.Fields {
				walk(path, cf, false)
			}
			return
		}
		first := count < 0 || leaves < count
		leaves++
		if hasMinMax(f.Type) && (first || top && needed[strings.ToLower(f.Name)]) {
			out = append(out, path)
		}
	}
	for _, f := range data {
		walk(nil, f, true)
	}
	return out
}

// resolvesIn reports whether a lower-cased path names a field of data.
func resolvesIn(fields []value.Field, path []string) bool {
	for _, f := range fields {
		if strings.ToLower(f.Name) != path[0] {
			continue
		}
		if len(path) == 1 {
			return true
		}
		st, ok := f.Type.(value.StructType)
		return ok && resolvesIn(st.Fields, path[1:])
	}
	return false
}
