package value

import (
	"fmt"
	"strings"
)

// Type is a Delta (Spark SQL) data type.
type Type interface {
	// String is Delta's name for the type: "long", "decimal(10,2)",
	// "array<string>", "struct<a:long>".
	String() string
	isType()
}

// Primitive is a Delta primitive type, named as in schemaString.
type Primitive string

// The Delta primitive types.
const (
	String       Primitive = "string"
	Long         Primitive = "long"
	Integer      Primitive = "integer"
	Short        Primitive = "short"
	Byte         Primitive = "byte"
	Float        Primitive = "float"
	Double       Primitive = "double"
	Boolean      Primitive = "boolean"
	Binary       Primitive = "binary"
	Date         Primitive = "date"
	Timestamp    Primitive = "timestamp"
	TimestampNTZ Primitive = "timestamp_ntz"
)

func (p Primitive) String() string { return string(p) }
func (Primitive) isType()          {}

// DecimalType is decimal(Precision, Scale), Precision <= 38.
type DecimalType struct {
	Precision int
	Scale     int
}

func (d DecimalType) String() string { return fmt.Sprintf("decimal(%d,%d)", d.Precision, d.Scale) }
func (DecimalType) isType()          {}

// ArrayType is an array of Element.
type ArrayType struct {
	Element      Type
	ContainsNull bool
}

func (a ArrayType) String() string { return "array<" + a.Element.String() + ">" }
func (ArrayType) isType()          {}

// MapType maps Key to Value.
type MapType struct {
	Key               Type
	Value             Type
	ValueContainsNull bool
}

func (m MapType) String() string { return "map<" + m.Key.String() + "," + m.Value.String() + ">" }
func (MapType) isType()          {}

// Field is one column of a StructType.
type Field struct {
	Name     string
	Type     Type
	Nullable bool
	// Metadata is the field's metadata object (column mapping ids and
	// physical names, comments...), kept verbatim.
	Metadata map[string]any
}

// StructType is a struct; a table schema is a StructType.
type StructType struct {
	Fields []Field
}

func (s StructType) String() string {
	var b strings.Builder
	b.WriteString("struct<")
	for i, f := range s.Fields {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.Name)
		b.WriteByte(':')
		b.WriteString(f.Type.String())
	}
	b.WriteByte('>')
	return b.String()
}
func (StructType) isType() {}

// Index returns the position of the field named name (exact match), or -1.
func (s StructType) Index(name string) int {
	for i, f := range s.Fields {
		if f.Name == name {
			return i
		}
	}
	return -1
}

// Field returns the field named name and whether it exists.
func (s StructType) Field(name string) (Field, bool) {
	if i := s.Index(name); i >= 0 {
		return s.Fields[i], true
	}
	return Field{}, false
}

// Equal reports whether two types are the same, ignoring field metadata.
func Equal(a, b Type) bool {
	switch x := a.(type) {
	case Primitive:
		y, ok := b.(Primitive)
		return ok && x == y
	case DecimalType:
		y, ok := b.(DecimalType)
		return ok && x == y
	case ArrayType:
		y, ok := b.(ArrayType)
		return ok && x.ContainsNull == y.ContainsNull && Equal(x.Element, y.Element)
	case MapType:
		y, ok := b.(MapType)
		return ok && x.ValueContainsNull == y.ValueContainsNull && Equal(x.Key, y.Key) && Equal(x.Value, y.Value)
	case StructType:
		y, ok := b.(StructType)
		if !ok || len(x.Fields) != len(y.Fields) {
			return false
		}
		if len(x.Fields) > 0 && &x.Fields[0] == &y.Fields[0] {
			return true // one schema, shared (a decoder's events share theirs)
		}
		for i := range x.Fields {
			fx, fy := x.Fields[i], y.Fields[i]
			if fx.Name != fy.Name || fx.Nullable != fy.Nullable || !Equal(fx.Type, fy.Type) {
				return false
			}
		}
		return true
	}
	return false
}
