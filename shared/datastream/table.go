package datastream

import (
	"fmt"
	"strings"

	"github.com/dsdelta/dsdelta/shared/value"
)

// TableID identifies a source table as <database-or-schema>.<table>, taken
// from source_metadata (MySQL: database + table; Oracle, PostgreSQL, SQL
// Server: schema + table), never from the folder name, which is ambiguous.
// A table id is unique within one stream, not across streams, so the
// configuration can give a stream a namespace: its tables are then
// <namespace>.<database-or-schema>.<table>. Every part is a name (see
// ValidatePart), so an id holds no '/' and splits at its dots.
type TableID struct {
	Namespace string // "" when the file's stream has none
	Database  string
	Table     string
}

// String returns "<database>.<table>", or "<namespace>.<database>.<table>".
func (t TableID) String() string {
	if t.Namespace != "" {
		return t.Namespace + "." + t.Database + "." + t.Table
	}
	return t.Database + "." + t.Table
}

// NewTableID validates both parts against [A-Za-z0-9_$-]+ and returns the id.
func NewTableID(database, table string) (TableID, error) {
	if err := ValidatePart(database); err != nil {
		return TableID{}, fmt.Errorf("database or schema name: %w", err)
	}
	if err := ValidatePart(table); err != nil {
		return TableID{}, fmt.Errorf("table name: %w", err)
	}
	return TableID{Database: database, Table: table}, nil
}

// ParseTableID parses "<database>.<table>" or
// "<namespace>.<database>.<table>" and validates every part.
func ParseTableID(s string) (TableID, error) {
	parts := strings.Split(s, ".")
	var ns string
	switch len(parts) {
	case 2:
	case 3:
		ns, parts = parts[0], parts[1:]
		if err := ValidateNamespace(ns); err != nil {
			return TableID{}, fmt.Errorf("table id %q: namespace: %w", s, err)
		}
	default:
		return TableID{}, fmt.Errorf("table id %q is not <database>.<table> or <namespace>.<database>.<table>", s)
	}
	id, err := NewTableID(parts[0], parts[1])
	if err != nil {
		return TableID{}, fmt.Errorf("table id %q: %w", s, err)
	}
	id.Namespace = ns
	return id, nil
}

// ValidateNamespace checks a lake namespace: a name (ValidatePart) that
// does not start with '_', as the lake's own folders (_staging, _dsdelta)
// do.
func ValidateNamespace(ns string) error {
	if err := ValidatePart(ns); err != nil {
		return err
	}
	if ns[0] == '_' {
		return fmt.Errorf("%q starts with '_', as the lake's own folders do", ns)
	}
	return nil
}

// ValidatePart checks one part of a table id against [A-Za-z0-9_$-]+: a
// name that is safe as an object name, a file name and a document id.
func ValidatePart(s string) error {
	if s == "" {
		return fmt.Errorf("empty")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c == '-') {
			return fmt.Errorf("%q has %q at byte %d; allowed are letters, digits, _, $ and -", s, c, i)
		}
	}
	return nil
}

// SchemaDiff lists how a table schema changed between two files.
type SchemaDiff struct {
	Added   []value.Field
	Dropped []value.Field
	Retyped []Retype
}

// Retype is a column whose type changed.
type Retype struct {
	Name     string
	Old, New value.Type
}

// Empty reports whether the schemas have the same columns and types.
func (d SchemaDiff) Empty() bool {
	return len(d.Added) == 0 && len(d.Dropped) == 0 && len(d.Retyped) == 0
}

// String summarises the change, e.g. "added b long; dropped c; retyped a int→long".
func (d SchemaDiff) String() string {
	var parts []string
	for _, f := range d.Added {
		parts = append(parts, "added "+f.Name+" "+f.Type.String())
	}
	for _, f := range d.Dropped {
		parts = append(parts, "dropped "+f.Name)
	}
	for _, r := range d.Retyped {
		parts = append(parts, "retyped "+r.Name+" "+r.Old.String()+"→"+r.New.String())
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, "; ")
}

// DiffSchema compares an old and a new payload schema by column name
// (exact, as Delta column names are matched case-insensitively only by
// engines, not by Datastream). Column order and nullability are not
// reported: Datastream makes every payload column nullable.
func DiffSchema(old, new value.StructType) SchemaDiff {
	var d SchemaDiff
	for _, nf := range new.Fields {
		of, ok := old.Field(nf.Name)
		switch {
		case !ok:
			d.Added = append(d.Added, nf)
		case !value.Equal(of.Type, nf.Type):
			d.Retyped = append(d.Retyped, Retype{Name: nf.Name, Old: of.Type, New: nf.Type})
		}
	}
	for _, of := range old.Fields {
		if new.Index(of.Name) < 0 {
			d.Dropped = append(d.Dropped, of)
		}
	}
	return d
}

// SchemaCache remembers the payload schema per (object, schema_key), as
// Datastream starts a new schema_key whenever the source schema changes; it
// also remembers the last schema seen per object so that a new key can be
// diffed against it. It is not safe for concurrent use.
type SchemaCache struct {
	byKey  map[[2]string]value.StructType
	latest map[string]value.StructType
}

// Observe records the schema of (object, schemaKey). It returns the
// difference to the object's previous schema and whether this (object,
// schemaKey) was new. The first schema of an object reports an empty diff.
func (c *SchemaCache) Observe(object, schemaKey string, s value.StructType) (SchemaDiff, bool) {
	if c.byKey == nil {
		c.byKey = map[[2]string]value.StructType{}
		c.latest = map[string]value.StructType{}
	}
	k := [2]string{object, schemaKey}
	if _, ok := c.byKey[k]; ok {
		prev := c.latest[object]
		c.latest[object] = s
		return DiffSchema(prev, s), false
	}
	c.byKey[k] = s
	prev, seen := c.latest[object]
	c.latest[object] = s
	if !seen {
		return SchemaDiff{}, true
	}
	return DiffSchema(prev, s), true
}

// Lookup returns the schema recorded for (object, schemaKey).
func (c *SchemaCache) Lookup(object, schemaKey string) (value.StructType, bool) {
	s, ok := c.byKey[[2]string{object, schemaKey}]
	return s, ok
}
