package value

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
)

// Spark's StructType JSON, as stored in Delta's metaData.schemaString.

type jsonField struct {
	Name     string          `json:"name"`
	Type     json.RawMessage `json:"type"`
	Nullable bool            `json:"nullable"`
	Metadata map[string]any  `json:"metadata"`
}

type jsonComplex struct {
	Type              string          `json:"type"`
	Fields            []jsonField     `json:"fields,omitempty"`
	ElementType       json.RawMessage `json:"elementType,omitempty"`
	ContainsNull      *bool           `json:"containsNull,omitempty"`
	KeyType           json.RawMessage `json:"keyType,omitempty"`
	ValueType         json.RawMessage `json:"valueType,omitempty"`
	ValueContainsNull *bool           `json:"valueContainsNull,omitempty"`
}

var decimalRE = regexp.MustCompile(`^decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)$`)

// ParseSchema parses a schemaString into a StructType.
func ParseSchema(schemaString string) (StructType, error) {
	t, err := ParseTypeJSON([]byte(schemaString))
	if err != nil {
		return StructType{}, fmt.Errorf("parse schema: %w", err)
	}
	st, ok := t.(StructType)
	if !ok {
		return StructType{}, fmt.Errorf("parse schema: top level is %s, not a struct", t)
	}
	return st, nil
}

// ParseTypeJSON parses one type in Spark JSON form: a string for primitives
// and decimals, an object for struct, array and map.
func ParseTypeJSON(b []byte) (Type, error) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var name string
		if err := json.Unmarshal(b, &name); err != nil {
			return nil, err
		}
		return ParsePrimitive(name)
	}
	var c jsonComplex
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	switch c.Type {
	case "struct":
		st := StructType{Fields: make([]Field, 0, len(c.Fields))}
		for _, f := range c.Fields {
			ft, err := ParseTypeJSON(f.Type)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", f.Name, err)
			}
			st.Fields = append(st.Fields, Field{Name: f.Name, Type: ft, Nullable: f.Nullable, Metadata: f.Metadata})
		}
		return st, nil
	case "array":
		et, err := ParseTypeJSON(c.ElementType)
		if err != nil {
			return nil, fmt.Errorf("array element: %w", err)
		}
		return ArrayType{Element: et, ContainsNull: c.ContainsNull == nil || *c.ContainsNull}, nil
	case "map":
		kt, err := ParseTypeJSON(c.KeyType)
		if err != nil {
			return nil, fmt.Errorf("map key: %w", err)
		}
		vt, err := ParseTypeJSON(c.ValueType)
		if err != nil {
			return nil, fmt.Errorf("map value: %w", err)
		}
		return MapType{Key: kt, Value: vt, ValueContainsNull: c.ValueContainsNull == nil || *c.ValueContainsNull}, nil
	}
	return nil, fmt.Errorf("unknown type %q", c.Type)
}

// ParsePrimitive parses a primitive or decimal type name.
func ParsePrimitive(name string) (Type, error) {
	switch Primitive(name) {
	case String, Long, Integer, Short, Byte, Float, Double, Boolean, Binary, Date, Timestamp, TimestampNTZ:
		return Primitive(name), nil
	}
	if name == "decimal" { // Spark's shorthand for the system default
		return DecimalType{Precision: 10, Scale: 0}, nil
	}
	if m := decimalRE.FindStringSubmatch(name); m != nil {
		p, _ := strconv.Atoi(m[1])
		s, _ := strconv.Atoi(m[2])
		if p < 1 || p > 38 || s < 0 || s > p {
			return nil, fmt.Errorf("invalid decimal(%d,%d)", p, s)
		}
		return DecimalType{Precision: p, Scale: s}, nil
	}
	return nil, fmt.Errorf("unsupported type %q", name)
}

// MarshalType renders a type in Spark JSON form.
func MarshalType(t Type) ([]byte, error) {
	switch x := t.(type) {
	case Primitive, DecimalType:
		return json.Marshal(x.String())
	case ArrayType:
		et, err := MarshalType(x.Element)
		if err != nil {
			return nil, err
		}
		return json.Marshal(jsonComplex{Type: "array", ElementType: et, ContainsNull: &x.ContainsNull})
	case MapType:
		kt, err := MarshalType(x.Key)
		if err != nil {
			return nil, err
		}
		vt, err := MarshalType(x.Value)
		if err != nil {
			return nil, err
		}
		return json.Marshal(jsonComplex{Type: "map", KeyType: kt, ValueType: vt, ValueContainsNull: &x.ValueContainsNull})
	case StructType:
		fields := make([]jsonField, 0, len(x.Fields))
		for _, f := range x.Fields {
			ft, err := MarshalType(f.Type)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", f.Name, err)
			}
			md := f.Metadata
			if md == nil {
				md = map[string]any{}
			}
			fields = append(fields, jsonField{Name: f.Name, Type: ft, Nullable: f.Nullable, Metadata: md})
		}
		// "fields" must be present even when empty.
		var buf bytes.Buffer
		buf.WriteString(`{"type":"struct","fields":`)
		fb, err := json.Marshal(fields)
		if err != nil {
			return nil, err
		}
		buf.Write(fb)
		buf.WriteByte('}')
		return buf.Bytes(), nil
	}
	return nil, fmt.Errorf("marshal type: unknown %T", t)
}

// SchemaString renders a table schema as Delta's schemaString.
func (s StructType) SchemaString() string {
	b, err := MarshalType(s)
	if err != nil {
		// Only reachable with a Type implemented outside this package.
		panic(err)
	}
	return string(b)
}
