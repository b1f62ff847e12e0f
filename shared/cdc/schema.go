package cdc

import (
	"fmt"
	"strings"

	"github.com/dsdelta/dsdelta/shared/value"
)

// Metadata columns. They are prefixed so they cannot collide with source
// columns (source columns starting with _ds_ are refused).
const (
	ColOp               = "_ds_op"
	ColChangeType       = "_ds_change_type"
	ColSourceTimestamp  = "_ds_source_timestamp"
	ColReadTimestamp    = "_ds_read_timestamp"
	ColReadMethod       = "_ds_read_method"
	ColPosition         = "_ds_position"
	ColOrder            = "_ds_order"
	ColUUID             = "_ds_uuid"
	ColIsDeleted        = "_ds_is_deleted"
	ColSourceFile       = "_ds_source_file"
	ColSourceGeneration = "_ds_source_generation"
	ColRecord           = "_ds_record"
	ColSourceDate       = "_ds_source_date"
	ColDeletedAt        = "_ds_deleted_at"
	MetaPrefix          = "_ds_"
)

// historyMeta are the history table's metadata columns, in order; the
// source columns follow them.
var historyMeta = []value.Field{
	{Name: ColSourceDate, Type: value.Date, Nullable: false},
	{Name: ColOp, Type: value.String, Nullable: false},
	{Name: ColChangeType, Type: value.String, Nullable: true},
	{Name: ColSourceTimestamp, Type: value.Timestamp, Nullable: false},
	{Name: ColReadTimestamp, Type: value.Timestamp, Nullable: true},
	{Name: ColReadMethod, Type: value.String, Nullable: true},
	{Name: ColPosition, Type: value.String, Nullable: false},
	{Name: ColOrder, Type: value.Binary, Nullable: false},
	{Name: ColUUID, Type: value.String, Nullable: true},
	{Name: ColIsDeleted, Type: value.Boolean, Nullable: true},
	{Name: ColSourceFile, Type: value.String, Nullable: true},
	{Name: ColSourceGeneration, Type: value.Long, Nullable: true},
	{Name: ColRecord, Type: value.Long, Nullable: true},
}

// stateMeta are the current-state table's metadata columns, after the
// source columns.
var stateMeta = []value.Field{
	{Name: ColSourceTimestamp, Type: value.Timestamp, Nullable: false},
	{Name: ColChangeType, Type: value.String, Nullable: true},
	{Name: ColPosition, Type: value.String, Nullable: false},
	{Name: ColOrder, Type: value.Binary, Nullable: false},
}

// tombstoneMeta follow the key columns in the tombstone table.
var tombstoneMeta = []value.Field{
	{Name: ColOrder, Type: value.Binary, Nullable: false},
	{Name: ColPosition, Type: value.String, Nullable: false},
	{Name: ColSourceTimestamp, Type: value.Timestamp, Nullable: false},
	{Name: ColDeletedAt, Type: value.Timestamp, Nullable: false},
}

// HistorySchema is the history table's schema for a source schema.
func HistorySchema(source value.StructType) value.StructType {
	fields := append([]value.Field(nil), historyMeta...)
	return value.StructType{Fields: append(fields, nullable(source.Fields)...)}
}

// StateSchema is the current-state table's schema for a source schema.
func StateSchema(source value.StructType) value.StructType {
	fields := nullable(source.Fields)
	return value.StructType{Fields: append(fields, stateMeta...)}
}

// TombstoneSchema is the tombstone table's schema for the key columns.
func TombstoneSchema(source value.StructType, key []string) (value.StructType, error) {
	var fields []value.Field
	for _, k := range key {
		f, ok := source.Field(k)
		if !ok {
			return value.StructType{}, fmt.Errorf("primary key column %q is not in the schema %s", k, source)
		}
		f.Nullable = true
		f.Metadata = nil
		fields = append(fields, f)
	}
	return value.StructType{Fields: append(fields, tombstoneMeta...)}, nil
}

// SourceSchema strips the metadata columns from a state or history schema.
func SourceSchema(st value.StructType) value.StructType {
	var out value.StructType
	for _, f := range st.Fields {
		if !strings.HasPrefix(f.Name, MetaPrefix) {
			out.Fields = append(out.Fields, f)
		}
	}
	return out
}

// nullable copies fields as nullable: a source column can become null
// (dropped later, or absent from an older file) whatever the source says.
func nullable(fs []value.Field) []value.Field {
	out := make([]value.Field, len(fs))
	for i, f := range fs {
		f.Nullable = true
		out[i] = f
	}
	return out
}

// ValidateSource refuses source schemas whose column names would collide
// with our metadata columns or with each other.
func ValidateSource(source value.StructType) error {
	seen := map[string]bool{}
	for _, f := range source.Fields {
		if strings.HasPrefix(strings.ToLower(f.Name), MetaPrefix) {
			return fmt.Errorf("source column %q uses the reserved prefix %s", f.Name, MetaPrefix)
		}
		l := strings.ToLower(f.Name)
		if seen[l] {
			return fmt.Errorf("source columns collide case-insensitively on %q", f.Name)
		}
		seen[l] = true
	}
	return nil
}

// SchemaChange is how an incoming source schema differs from a table's.
type SchemaChange struct {
	Added   []value.Field
	Dropped []string
	// Widened are type changes value.Widen allows (integer to long, long
	// to decimal, more decimal digits...): the table takes the wider type
	// and its existing rows are converted.
	Widened []Retype
	// Retyped are the other type changes: conflicts.
	Retyped []Retype
}

// Retype is a column whose type changed.
type Retype struct {
	Column   string
	Old, New value.Type
}

func (r Retype) String() string {
	return fmt.Sprintf("column %q changed type from %s to %s", r.Column, r.Old, r.New)
}

// CompareSchemas lists how incoming differs from current (names matched
// case-insensitively, as Delta does).
func CompareSchemas(current, incoming value.StructType) SchemaChange {
	var ch SchemaChange
	cur := map[string]value.Field{}
	for _, f := range current.Fields {
		cur[strings.ToLower(f.Name)] = f
	}
	in := map[string]bool{}
	for _, f := range incoming.Fields {
		in[strings.ToLower(f.Name)] = true
		old, ok := cur[strings.ToLower(f.Name)]
		switch {
		case !ok:
			ch.Added = append(ch.Added, f)
		case !value.Equal(old.Type, f.Type):
			w, ok := value.Widen(old.Type, f.Type)
			switch {
			case !ok:
				ch.Retyped = append(ch.Retyped, Retype{Column: f.Name, Old: old.Type, New: f.Type})
			case !value.Equal(w, old.Type): // incoming is wider: the table widens
				ch.Widened = append(ch.Widened, Retype{Column: old.Name, Old: old.Type, New: w})
			}
		}
	}
	for _, f := range current.Fields {
		if !in[strings.ToLower(f.Name)] {
			ch.Dropped = append(ch.Dropped, f.Name)
		}
	}
	return ch
}

// MergeSchemas is schema mode "merge": the current columns (widened where
// the incoming type is a wider numeric or date type), then added columns
// (nullable); dropped columns stay. Other type changes are an error the
// caller turns into a quarantine.
func MergeSchemas(current, incoming value.StructType) (value.StructType, SchemaChange, error) {
	ch := CompareSchemas(current, incoming)
	if len(ch.Retyped) > 0 {
		return current, ch, fmt.Errorf("%w: %s", ErrSchemaConflict, ch.Retyped[0])
	}
	out := value.StructType{Fields: append([]value.Field(nil), current.Fields...)}
	for _, w := range ch.Widened {
		for i := range out.Fields {
			if out.Fields[i].Name == w.Column {
				out.Fields[i].Type = w.New
			}
		}
	}
	out.Fields = append(out.Fields, nullable(ch.Added)...)
	return out, ch, nil
}
