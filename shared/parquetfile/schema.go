package parquetfile

import (
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding"

	"github.com/dsdelta/dsdelta/shared/value"
)

// ErrValueType is returned when a value is not the Go representation of
// its column's type (see package value), or a non-nullable column holds
// nil.
var ErrValueType = errors.New("value does not match column type")

// Node is one node of a file's schema as a writer sees it: how a value of
// package value is shredded into Parquet leaf columns with repetition and
// definition levels.
type Node struct {
	Kind     NodeKind
	Type     value.Type
	Optional bool
	Children []*Node // struct fields; list: [element]; map: [key, value]
	Leaf     int     // column index of a leaf
	// FirstLeaf and EndLeaf are the column indexes of the leaves below:
	// the first and one past the last.
	FirstLeaf, EndLeaf int
	RepLevel           int // repetition level of a list's or map's repeated group
	// DefLevel is a top-level leaf's definition level when it holds a
	// value.
	DefLevel int
	// Convert converts a leaf's value to its Parquet value.
	Convert func(any) (parquet.Value, error)
}

// NodeKind is what a Node is.
type NodeKind int

// The kinds of Node.
const (
	LeafNode NodeKind = iota
	StructNode
	ListNode
	MapNode
)

// Naming gives a schema field its name in the file and its Parquet field
// id, 0 for none. List elements and map keys and values are named by
// Parquet's own rules: Naming sees them as value.Field{}.
type Naming func(value.Field) (name string, id int)

// Schema is the Parquet schema of a file's columns, built from their
// value types, with how to shred their values (Columns).
type Schema struct {
	// Columns are the schema nodes of the fields NewSchema was given.
	Columns []*Node
	// Leaves counts the leaf columns.
	Leaves int
	// Parquet is the schema of the file, its columns in the fields' order.
	Parquet *parquet.Schema
}

// NewSchema returns the schema of a file of fields, each named by naming.
func NewSchema(fields []value.Field, naming Naming) (*Schema, error) {
	b := &schemaBuilder{naming: naming}
	s := &Schema{}
	var pfields []parquet.Field
	for _, f := range fields {
		n, node, err := b.build(f.Type, f.Nullable, f, 0)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", f.Name, err)
		}
		name, _ := naming(f)
		s.Columns = append(s.Columns, n)
		pfields = append(pfields, NamedField(name, node))
	}
	s.Leaves = b.leaves
	s.Parquet = parquet.NewSchema("spark_schema", NewGroup(pfields...))
	return s, nil
}

// schemaBuilder numbers the leaves as NewSchema builds their nodes.
type schemaBuilder struct {
	naming Naming
	leaves int
}

// build creates the shredding node and the Parquet node of a type; field
// is the schema field naming it, when any.
func (b *schemaBuilder) build(t value.Type, nullable bool, field value.Field, rep int) (*Node, parquet.Node, error) {
	n := &Node{Type: t, Optional: nullable, FirstLeaf: b.leaves}
	var node parquet.Node
	switch tt := t.(type) {
	case value.StructType:
		n.Kind = StructNode
		var fields []parquet.Field
		for _, cf := range tt.Fields {
			c, cn, err := b.build(cf.Type, cf.Nullable, cf, rep)
			if err != nil {
				return nil, nil, fmt.Errorf("field %q: %w", cf.Name, err)
			}
			n.Children = append(n.Children, c)
			name, _ := b.naming(cf)
			fields = append(fields, NamedField(name, cn))
		}
		if len(fields) == 0 {
			return nil, nil, fmt.Errorf("struct without fields")
		}
		node = NewGroup(fields...)
	case value.ArrayType:
		n.Kind = ListNode
		n.RepLevel = rep + 1
		c, cn, err := b.build(tt.Element, tt.ContainsNull, value.Field{}, rep+1)
		if err != nil {
			return nil, nil, fmt.Errorf("array element: %w", err)
		}
		n.Children = []*Node{c}
		node = parquet.List(cn)
	case value.MapType:
		n.Kind = MapNode
		n.RepLevel = rep + 1
		k, kn, err := b.build(tt.Key, false, value.Field{}, rep+1)
		if err != nil {
			return nil, nil, fmt.Errorf("map key: %w", err)
		}
		v, vn, err := b.build(tt.Value, tt.ValueContainsNull, value.Field{}, rep+1)
		if err != nil {
			return nil, nil, fmt.Errorf("map value: %w", err)
		}
		n.Children = []*Node{k, v}
		node = parquet.Map(kn, vn)
	default:
		n.Kind = LeafNode
		leaf, conv, err := leafNode(t)
		if err != nil {
			return nil, nil, err
		}
		n.Leaf = b.leaves
		b.leaves++
		n.Convert = conv
		if nullable {
			n.DefLevel = 1
		}
		node = leaf
	}
	n.EndLeaf = b.leaves
	if nullable {
		node = parquet.Optional(node)
	} else {
		node = parquet.Required(node)
	}
	if _, id := b.naming(field); id > 0 {
		node = parquet.FieldID(node, id)
	}
	return n, node, nil
}

// leafNode returns the Parquet leaf for a primitive type and the
// conversion of its Go values.
func leafNode(t value.Type) (parquet.Node, func(any) (parquet.Value, error), error) {
	mismatch := func(v any) (parquet.Value, error) {
		return parquet.Value{}, fmt.Errorf("%w: %T is not a %v value", ErrValueType, v, t)
	}
	if dt, ok := t.(value.DecimalType); ok {
		return decimalLeaf(dt, mismatch)
	}
	switch t {
	case value.Boolean:
		return parquet.Leaf(parquet.BooleanType), func(v any) (parquet.Value, error) {
			if x, ok := v.(bool); ok {
				return parquet.BooleanValue(x), nil
			}
			return mismatch(v)
		}, nil
	case value.Byte:
		return parquet.Int(8), func(v any) (parquet.Value, error) {
			if x, ok := v.(int8); ok {
				return parquet.Int32Value(int32(x)), nil
			}
			return mismatch(v)
		}, nil
	case value.Short:
		return parquet.Int(16), func(v any) (parquet.Value, error) {
			if x, ok := v.(int16); ok {
				return parquet.Int32Value(int32(x)), nil
			}
			return mismatch(v)
		}, nil
	case value.Integer:
		return parquet.Int(32), func(v any) (parquet.Value, error) {
			if x, ok := v.(int32); ok {
				return parquet.Int32Value(x), nil
			}
			return mismatch(v)
		}, nil
	case value.Long:
		return parquet.Leaf(parquet.Int64Type), func(v any) (parquet.Value, error) {
			if x, ok := v.(int64); ok {
				return parquet.Int64Value(x), nil
			}
			return mismatch(v)
		}, nil
	case value.Float:
		return parquet.Leaf(parquet.FloatType), func(v any) (parquet.Value, error) {
			if x, ok := v.(float32); ok {
				return parquet.FloatValue(x), nil
			}
			return mismatch(v)
		}, nil
	case value.Double:
		return parquet.Leaf(parquet.DoubleType), func(v any) (parquet.Value, error) {
			if x, ok := v.(float64); ok {
				return parquet.DoubleValue(x), nil
			}
			return mismatch(v)
		}, nil
	case value.String:
		return parquet.String(), func(v any) (parquet.Value, error) {
			if x, ok := v.(string); ok {
				// parquet-go copies a value's bytes into its column
				// buffer and never writes through them, so the string's
				// own bytes are lent, not copied: a copy per string
				// value was a tenth of a merge's allocations.
				return parquet.ByteArrayValue(unsafe.Slice(unsafe.StringData(x), len(x))), nil
			}
			return mismatch(v)
		}, nil
	case value.Binary:
		return parquet.Leaf(parquet.ByteArrayType), func(v any) (parquet.Value, error) {
			if x, ok := v.([]byte); ok {
				return parquet.ByteArrayValue(x), nil
			}
			return mismatch(v)
		}, nil
	case value.Date:
		return parquet.Date(), func(v any) (parquet.Value, error) {
			if x, ok := v.(value.Days); ok {
				return parquet.Int32Value(int32(x)), nil
			}
			return mismatch(v)
		}, nil
	case value.Timestamp:
		return parquet.TimestampAdjusted(parquet.Microsecond, true), func(v any) (parquet.Value, error) {
			if x, ok := v.(value.Micros); ok {
				return parquet.Int64Value(int64(x)), nil
			}
			return mismatch(v)
		}, nil
	case value.TimestampNTZ:
		return parquet.TimestampAdjusted(parquet.Microsecond, false), func(v any) (parquet.Value, error) {
			if x, ok := v.(value.LocalMicros); ok {
				return parquet.Int64Value(int64(x)), nil
			}
			return mismatch(v)
		}, nil
	}
	return nil, nil, fmt.Errorf("unsupported column type %v", t)
}

// decimalLeaf is leafNode of a decimal: INT32, INT64 or, beyond 18
// digits, FIXED_LEN_BYTE_ARRAY, whose page and chunk bounds parquet-go
// (since v0.32.1) takes in the signed order of the values.
func decimalLeaf(dt value.DecimalType, mismatch func(any) (parquet.Value, error)) (parquet.Node, func(any) (parquet.Value, error), error) {
	if dt.Precision < 1 || dt.Precision > 38 || dt.Scale < 0 || dt.Scale > dt.Precision {
		return nil, nil, fmt.Errorf("unsupported %v", dt)
	}
	limit := DecimalLimit(dt.Precision)
	fit := func(v any) (*big.Int, error) {
		d, ok := v.(value.Decimal)
		if !ok || d.Unscaled == nil {
			_, err := mismatch(v)
			return nil, err
		}
		r, err := d.Rescale(dt.Scale)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrValueType, err)
		}
		if new(big.Int).Abs(r.Unscaled).Cmp(limit) >= 0 {
			return nil, fmt.Errorf("%w: %s overflows %v", ErrValueType, d, dt)
		}
		return r.Unscaled, nil
	}
	switch {
	case dt.Precision <= 9:
		return parquet.Decimal(dt.Scale, dt.Precision, parquet.Int32Type), func(v any) (parquet.Value, error) {
			u, err := fit(v)
			if err != nil {
				return parquet.Value{}, err
			}
			return parquet.Int32Value(int32(u.Int64())), nil
		}, nil
	case dt.Precision <= 18:
		return parquet.Decimal(dt.Scale, dt.Precision, parquet.Int64Type), func(v any) (parquet.Value, error) {
			u, err := fit(v)
			if err != nil {
				return parquet.Value{}, err
			}
			return parquet.Int64Value(u.Int64()), nil
		}, nil
	default:
		size := DecimalBytes(dt.Precision)
		var slab []byte // the closure is one writer's, used by one goroutine
		node := parquet.Decimal(dt.Scale, dt.Precision, parquet.FixedLenByteArrayType(size))
		return node, func(v any) (parquet.Value, error) {
			// Most values are of the column's scale and fit 64 bits,
			// which a precision above 18 always holds: no big.Int
			// arithmetic for them, and their bytes are cut from a
			// slab (parquet-go copies them into its column buffer).
			if d, ok := v.(value.Decimal); ok && d.Unscaled != nil && d.Scale == dt.Scale && d.Unscaled.IsInt64() {
				if len(slab) < size {
					slab = make([]byte, 256*size)
				}
				b := slab[:size:size]
				slab = slab[size:]
				PutInt64TwosComplement(b, d.Unscaled.Int64())
				return parquet.FixedLenByteArrayValue(b), nil
			}
			u, err := fit(v)
			if err != nil {
				return parquet.Value{}, err
			}
			return parquet.FixedLenByteArrayValue(TwosComplement(u, size)), nil
		}, nil
	}
}

// Shred appends v's leaf values to leaves (one slice a leaf column) with
// the given repetition level r (for the first value) and definition level
// d of the parent.
func (n *Node) Shred(leaves [][]parquet.Value, v any, r, d int) error {
	if v == nil {
		if !n.Optional {
			return fmt.Errorf("%w: null in non-nullable %v", ErrValueType, n.Type)
		}
		n.Nulls(leaves, r, d)
		return nil
	}
	if n.Optional {
		d++
	}
	switch n.Kind {
	case LeafNode:
		pv, err := n.Convert(v)
		if err != nil {
			return err
		}
		leaves[n.Leaf] = append(leaves[n.Leaf], pv.Level(r, d, n.Leaf))
	case StructNode:
		fields, ok := v.([]any)
		if !ok || len(fields) != len(n.Children) {
			return fmt.Errorf("%w: %T is not a %v value", ErrValueType, v, n.Type)
		}
		for i, c := range n.Children {
			if err := c.Shred(leaves, fields[i], r, d); err != nil {
				return fmt.Errorf("field %d: %w", i, err)
			}
		}
	case ListNode:
		elems, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%w: %T is not a %v value", ErrValueType, v, n.Type)
		}
		if len(elems) == 0 {
			n.Nulls(leaves, r, d)
			return nil
		}
		for i, e := range elems {
			rr := r
			if i > 0 {
				rr = n.RepLevel
			}
			if err := n.Children[0].Shred(leaves, e, rr, d+1); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
		}
	case MapNode:
		entries, ok := v.([]value.MapEntry)
		if !ok {
			return fmt.Errorf("%w: %T is not a %v value", ErrValueType, v, n.Type)
		}
		if len(entries) == 0 {
			n.Nulls(leaves, r, d)
			return nil
		}
		for i, e := range entries {
			rr := r
			if i > 0 {
				rr = n.RepLevel
			}
			if err := n.Children[0].Shred(leaves, e.Key, rr, d+1); err != nil {
				return fmt.Errorf("map key %d: %w", i, err)
			}
			if err := n.Children[1].Shred(leaves, e.Value, rr, d+1); err != nil {
				return fmt.Errorf("map value %d: %w", i, err)
			}
		}
	}
	return nil
}

// Nulls appends an absent value (null or empty collection) to leaves for
// every leaf below n.
func (n *Node) Nulls(leaves [][]parquet.Value, r, d int) {
	for leaf := n.FirstLeaf; leaf < n.EndLeaf; leaf++ {
		leaves[leaf] = append(leaves[leaf], parquet.NullValue().Level(r, d, leaf))
	}
}

// Group is a Parquet group that keeps its fields in the order given
// (parquet.Group sorts them by name), so that a file lists its columns as
// its table's schema does.
type Group struct{ fields []parquet.Field }

// NewGroup returns the group of fields, in their order.
func NewGroup(fields ...parquet.Field) *Group { return &Group{fields: fields} }

func (g *Group) ID() int                     { return 0 }
func (g *Group) String() string              { return g.asGroup().String() }
func (g *Group) Type() parquet.Type          { return parquet.Group{}.Type() }
func (g *Group) Optional() bool              { return false }
func (g *Group) Repeated() bool              { return false }
func (g *Group) Required() bool              { return true }
func (g *Group) Leaf() bool                  { return false }
func (g *Group) Fields() []parquet.Field     { return g.fields }
func (g *Group) Encoding() encoding.Encoding { return nil }
func (g *Group) Compression() compress.Codec { return nil }
func (g *Group) GoType() reflect.Type        { return g.asGroup().GoType() }
func (g *Group) asGroup() parquet.Group {
	m := parquet.Group{}
	for _, f := range g.fields {
		m[f.Name()] = f
	}
	return m
}

// NamedField is node as a field of a Group.
func NamedField(name string, node parquet.Node) parquet.Field {
	return &namedField{Node: node, name: name}
}

type namedField struct {
	parquet.Node
	name string
}

func (f *namedField) Name() string                      { return f.name }
func (f *namedField) Value(reflect.Value) reflect.Value { return reflect.Value{} }
