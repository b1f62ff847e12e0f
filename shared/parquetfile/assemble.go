package parquetfile

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/dsdelta/dsdelta/shared/value"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// Assembly reads chosen columns of a file's row groups as rows: one value
// per output column, assembled from the leaves below its Parquet node
// (Dremel record assembly driven by repetition and definition levels), or
// a constant.
type Assembly struct {
	b   asmBuilder
	out []*asm
}

// NewAssembly returns an assembly without output columns of a file of
// nleaves leaf columns, whose struct fields it finds by naming (see
// ReadSpec.Naming).
func NewAssembly(nleaves int, naming Naming) *Assembly {
	return &Assembly{b: asmBuilder{naming: naming, streams: make([]*colStream, nleaves)}}
}

// Constant adds an output column holding v in every row.
func (a *Assembly) Constant(v any) {
	a.out = append(a.out, &asm{kind: asmConst, constant: v})
}

// Column adds an output column of type t stored in node p of the file's
// schema tree (see Tree); ErrSchemaMismatch when p cannot hold t.
func (a *Assembly) Column(t value.Type, p *TreeNode) error {
	c, err := a.b.build(t, p, false)
	if err != nil {
		return err
	}
	a.out = append(a.out, c)
	return nil
}

// outputs adds the output columns fields: constants (by position) and
// the fields root lacks as constants, the others read from root's nodes.
func (a *Assembly) outputs(root *TreeNode, fields []value.Field, constants map[int]any) error {
	a.out = slices.Grow(a.out, len(fields))
	for k, fld := range fields {
		if v, ok := constants[k]; ok {
			a.Constant(v)
			continue
		}
		p := root.Field(fld, a.b.naming)
		if p == nil {
			a.Constant(nil)
			continue
		}
		if err := a.Column(fld.Type, p); err != nil {
			return fmt.Errorf("column %q: %w", fld.Name, err)
		}
	}
	return nil
}

// ReadRowGroup reads the rows of row group g (rg) of ra, whose first row
// is at physical position base, to fn, but those deleted marks: through
// the flat read where every output column is flat (see flatReader), the
// record assembly otherwise.
func (a *Assembly) ReadRowGroup(ctx context.Context, ra *File, g int, rg parquet.RowGroup, base int64, deleted *roaring64.Bitmap, fn func([]any) error) error {
	at := func(_ int64, row []any) error { return fn(row) }
	f := ra.Parquet()
	if flat := newFlatReader(a.out, a.b.streams, false); flat != nil {
		return flat.readGroup(ctx, ra, f, g, rg, base, deleted, at)
	}
	return readRowGroupAt(ctx, ra, f, g, rg, a.b.streams, a.out, base, deleted, at)
}

// readRowGroupAt reads the rows of row group g (rg) of f through the
// assemblers out to fn, with their physical positions.
func readRowGroupAt(ctx context.Context, ra *File, f *parquet.File, g int, rg parquet.RowGroup, streams []*colStream, out []*asm, base int64, deleted *roaring64.Bitmap, fn func(int64, []any) error) error {
	err := loadRowGroup(ra, f, g, streams)
	defer ra.Release()
	if err != nil {
		return err
	}
	chunks := rg.ColumnChunks()
	for i, s := range streams {
		if s == nil {
			continue
		}
		if i >= len(chunks) {
			return fmt.Errorf("row group has %d column chunks, schema needs column %d", len(chunks), i)
		}
		if err := s.open(chunks[i]); err != nil {
			closeStreams(streams)
			return err
		}
	}
	defer closeStreams(streams)
	n := rg.NumRows()
	for r := range n {
		if r%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		row := make([]any, len(out))
		for k, a := range out {
			v, err := a.read()
			if err != nil {
				return fmt.Errorf("row %d: %w", base+r, err)
			}
			row[k] = v
		}
		if deleted != nil && deleted.Contains(uint64(base+r)) {
			continue
		}
		if err := fn(base+r, row); err != nil {
			return err
		}
	}
	return nil
}

// loadRowGroup fetches the column chunks of row group g that streams (by
// leaf) read and checks their pages; the caller releases them
// (ra.release) once read, whether or not this fails.
func loadRowGroup(ra *File, f *parquet.File, g int, streams []*colStream) error {
	meta := f.Metadata().RowGroups[g]
	var ranges [][2]int64
	for i, s := range streams {
		if s == nil || i >= len(meta.Columns) {
			continue
		}
		cm := meta.Columns[i].MetaData
		start := cm.DataPageOffset
		if cm.DictionaryPageOffset > 0 && cm.DictionaryPageOffset < start {
			start = cm.DictionaryPageOffset
		}
		ranges = append(ranges, [2]int64{start, start + cm.TotalCompressedSize})
	}
	if err := ra.Prefetch(ranges); err != nil {
		return err
	}
	for i, s := range streams {
		if s != nil {
			if err := ra.CheckPages(g, i); err != nil {
				return err
			}
		}
	}
	return nil
}

func closeStreams(streams []*colStream) {
	for _, s := range streams {
		if s != nil && s.r != nil {
			s.close()
			s.r = nil
		}
	}
}

// colStream reads the values (with levels) of one leaf column chunk.
type colStream struct {
	r   parquet.ColumnChunkValueReader
	buf []parquet.Value
	pos int
	n   int
	// leaf and name identify the column in errors.
	leaf int
	name string
}

func (s *colStream) reset(r parquet.ColumnChunkValueReader) {
	s.r, s.pos, s.n = r, 0, 0
	if s.buf == nil {
		s.buf = make([]parquet.Value, 1024)
	}
}

func (s *colStream) fill() error {
	if s.pos < s.n {
		return nil
	}
	n, err := s.readValues()
	s.pos, s.n = 0, n
	if n > 0 {
		return nil
	}
	if err == nil || err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readValues reads the next values of the chunk into s.buf. parquet-go
// decodes pages here and panics on some corrupt ones (the checks of
// pageChecker do not decode values); the panic becomes an error naming the
// column. The deferred recover costs one call per 1024 values.
func (s *colStream) readValues() (n int, err error) {
	defer func() {
		if p := recover(); p != nil {
			n, err = 0, Corruptf("column %d (%s): decode pages: %v", s.leaf, s.name, p)
		}
	}()
	return s.r.ReadValues(s.buf)
}

// close closes the chunk's reader; a reader that panicked while decoding
// may panic again, which is ignored: the read already failed.
func (s *colStream) close() {
	defer func() { _ = recover() }()
	s.r.Close()
}

// open starts reading chunk c, turning a panic of parquet-go on a corrupt
// chunk into an error naming the column.
func (s *colStream) open(c parquet.ColumnChunk) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.r, err = nil, Corruptf("column %d (%s): open pages: %v", s.leaf, s.name, p)
		}
	}()
	s.reset(parquet.NewColumnChunkValueReader(c))
	return nil
}

// peek returns the next value without consuming it; ok is false at the end
// of the chunk.
func (s *colStream) peek() (parquet.Value, bool) {
	if s.fill() != nil {
		return parquet.Value{}, false
	}
	return s.buf[s.pos], true
}

func (s *colStream) next() (parquet.Value, error) {
	if err := s.fill(); err != nil {
		return parquet.Value{}, fmt.Errorf("column chunk ended early: %w", err)
	}
	v := s.buf[s.pos]
	s.pos++
	return v, nil
}

// asm assembles one value of a type of package value from Parquet leaf columns
// (Dremel record assembly driven by repetition and definition levels).
type asm struct {
	kind     asmKind
	constant any
	// nullDef > 0 means the node is optional: it is null when the next
	// definition level is below nullDef.
	nullDef int
	// list and map: the repeated group's definition and repetition levels.
	elemDef  int
	repLevel int
	children []*asm
	probe    *asm         // struct: columns read only to stay aligned
	leaves   []*colStream // every stream below, to consume nulls
	first    *colStream   // a stream below, to peek levels
	// leaf
	stream *colStream
	maxDef int
	conv   func(parquet.Value) (any, error)
	// str is conv of a string leaf, from a byte array's bytes; i64 that of
	// an INT64 leaf Int64Converter covers, from the stored integer.
	str func([]byte) any
	i64 func(int64) any
}

type asmKind int

const (
	asmConst asmKind = iota
	asmLeaf
	asmStruct
	asmList
	asmMap
	asmSkip // consumes a Parquet subtree whose value is not wanted
)

func (a *asm) read() (any, error) {
	if a.kind == asmConst {
		return a.constant, nil
	}
	if a.nullDef > 0 {
		v, ok := a.first.peek()
		if !ok {
			return nil, fmt.Errorf("column chunk ended early: %w", io.ErrUnexpectedEOF)
		}
		if v.DefinitionLevel() < a.nullDef {
			return nil, a.consumeOne()
		}
	}
	switch a.kind {
	case asmLeaf:
		v, err := a.stream.next()
		if err != nil {
			return nil, err
		}
		if v.DefinitionLevel() < a.maxDef || v.IsNull() {
			return nil, nil
		}
		return a.conv(v)
	case asmStruct:
		out := make([]any, len(a.children))
		for i, c := range a.children {
			v, err := c.read()
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		if a.probe != nil {
			if _, err := a.probe.read(); err != nil {
				return nil, err
			}
		}
		return out, nil
	case asmSkip:
		for _, c := range a.children {
			if _, err := c.read(); err != nil {
				return nil, err
			}
		}
		return nil, nil
	case asmList, asmMap:
		v, ok := a.first.peek()
		if !ok {
			return nil, fmt.Errorf("column chunk ended early: %w", io.ErrUnexpectedEOF)
		}
		if v.DefinitionLevel() < a.elemDef {
			if err := a.consumeOne(); err != nil {
				return nil, err
			}
			if a.kind == asmMap {
				return []value.MapEntry{}, nil
			}
			return []any{}, nil
		}
		var list []any
		var entries []value.MapEntry
		for {
			if a.kind == asmList {
				e, err := a.children[0].read()
				if err != nil {
					return nil, err
				}
				list = append(list, e)
			} else {
				k, err := a.children[0].read()
				if err != nil {
					return nil, err
				}
				val, err := a.children[1].read()
				if err != nil {
					return nil, err
				}
				entries = append(entries, value.MapEntry{Key: k, Value: val})
			}
			nx, ok := a.first.peek()
			if !ok || nx.RepetitionLevel() != a.repLevel {
				break
			}
		}
		if a.kind == asmMap {
			return entries, nil
		}
		return list, nil
	}
	return nil, fmt.Errorf("unknown assembler")
}

// consumeOne skips the single entry every leaf below holds for a null or
// empty value.
func (a *asm) consumeOne() error {
	for _, s := range a.leaves {
		if _, err := s.next(); err != nil {
			return err
		}
	}
	return nil
}

type asmBuilder struct {
	naming  Naming
	streams []*colStream
	kept    *Kept // ReadSpec.KeepRows
}

func (b *asmBuilder) stream(p *TreeNode) *colStream {
	if b.streams[p.Leaf] == nil {
		b.streams[p.Leaf] = &colStream{leaf: p.Leaf, name: p.Name}
	}
	return b.streams[p.Leaf]
}

// build makes the assembler of type t stored in Parquet node p;
// asElement treats a repeated p as one element of its list.
func (b *asmBuilder) build(t value.Type, p *TreeNode, asElement bool) (*asm, error) {
	rep := p.Repetition()
	if rep == format.Repeated && !asElement {
		// A bare repeated field (no LIST wrapper) is a list of required
		// elements.
		switch tt := t.(type) {
		case value.ArrayType:
			el, err := b.build(tt.Element, p, true)
			if err != nil {
				return nil, err
			}
			return b.collection(asmList, p, p, []*asm{el}, false), nil
		case value.MapType:
			// buildMap takes a repeated node as the key_value group itself.
		default:
			return nil, fmt.Errorf("%w: repeated Parquet field %q for %v", ErrSchemaMismatch, p.Name, t)
		}
	}
	var a *asm
	var err error
	switch tt := t.(type) {
	case value.StructType:
		a, err = b.buildStruct(tt, p)
	case value.ArrayType:
		a, err = b.buildList(tt, p)
	case value.MapType:
		a, err = b.buildMap(tt, p)
	default:
		a, err = b.buildLeaf(t, p)
	}
	if err != nil {
		return nil, err
	}
	if rep == format.Optional && a.kind != asmList && a.kind != asmMap {
		a.nullDef = p.Def
	}
	return a, nil
}

func (b *asmBuilder) buildLeaf(t value.Type, p *TreeNode) (*asm, error) {
	if !p.IsLeaf() {
		return nil, fmt.Errorf("%w: Parquet group %q for %v", ErrSchemaMismatch, p.Name, t)
	}
	conv, err := Converter(t, &p.El, b.kept)
	if err != nil {
		return nil, err
	}
	var str func([]byte) any
	if t == value.String {
		str = repeatedStrings(StringConverter(b.kept))
		conv = func(v parquet.Value) (any, error) { return str(v.ByteArray()), nil }
	}
	s := b.stream(p)
	return &asm{kind: asmLeaf, stream: s, maxDef: p.Def, conv: conv, str: str, i64: Int64Converter(t, &p.El, b.kept), leaves: []*colStream{s}, first: s}, nil
}

// repeatedStrings makes a leaf's string converter hand out the previous
// value again when the next one has the same bytes: a row reader then keeps
// one string for a run of equal values (dictionary-encoded columns such as
// a change's operation, read method or source file repeat in runs), instead
// of a string and an interface box per row. Strings are immutable, so rows
// may share them. The converter belongs to one assembly, read by one
// goroutine.
func repeatedStrings(conv func([]byte) any) func([]byte) any {
	var last string
	var lastV any
	return func(b []byte) any {
		if lastV != nil && string(b) == last {
			return lastV
		}
		out := conv(b)
		last, lastV = out.(string), out
		return out
	}
}

func (b *asmBuilder) buildStruct(t value.StructType, p *TreeNode) (*asm, error) {
	if p.IsLeaf() {
		return nil, fmt.Errorf("%w: Parquet column %q for %v", ErrSchemaMismatch, p.Name, t)
	}
	a := &asm{kind: asmStruct}
	for _, f := range t.Fields {
		cp := p.Field(f, b.naming)
		if cp == nil {
			a.children = append(a.children, &asm{kind: asmConst})
			continue
		}
		c, err := b.build(f.Type, cp, false)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Name, err)
		}
		a.children = append(a.children, c)
		a.leaves = append(a.leaves, c.leaves...)
	}
	if len(a.leaves) == 0 {
		// None of the wanted fields is in the file: read the group's own
		// columns anyway, to learn where it is null and to stay aligned.
		a.probe = b.skipper(p)
		a.leaves = a.probe.leaves
	}
	a.first = a.leaves[0]
	return a, nil
}

// skipper consumes Parquet node p (as a non-repeated, required value).
func (b *asmBuilder) skipper(p *TreeNode) *asm {
	return b.skipNode(p, true)
}

func (b *asmBuilder) skipNode(p *TreeNode, asElement bool) *asm {
	if p.Repetition() == format.Repeated && !asElement {
		el := b.skipNode(p, true)
		return b.collection(asmList, p, p, []*asm{el}, false)
	}
	var a *asm
	if p.IsLeaf() {
		s := b.stream(p)
		a = &asm{kind: asmLeaf, stream: s, maxDef: p.Def, conv: func(parquet.Value) (any, error) { return nil, nil }, leaves: []*colStream{s}, first: s}
	} else {
		a = &asm{kind: asmSkip}
		for _, c := range p.Children {
			ca := b.skipNode(c, false)
			a.children = append(a.children, ca)
			a.leaves = append(a.leaves, ca.leaves...)
		}
		a.first = a.leaves[0]
	}
	if p.Repetition() == format.Optional {
		a.nullDef = p.Def
	}
	return a
}

// collection makes a list or map assembler: outer is the field's node
// (possibly the repeated node itself), repeated the repeated group.
func (b *asmBuilder) collection(kind asmKind, outer, repeated *TreeNode, children []*asm, optional bool) *asm {
	a := &asm{kind: kind, children: children, elemDef: repeated.Def, repLevel: repeated.Rep}
	for _, c := range children {
		a.leaves = append(a.leaves, c.leaves...)
	}
	if len(a.leaves) > 0 {
		a.first = a.leaves[0]
	}
	if optional {
		a.nullDef = outer.Def
	}
	return a
}

// buildList resolves the LIST encodings, including the legacy two-level
// forms, per the Parquet backward-compatibility rules.
func (b *asmBuilder) buildList(t value.ArrayType, p *TreeNode) (*asm, error) {
	if p.IsLeaf() || len(p.Children) != 1 || p.Children[0].Repetition() != format.Repeated {
		return nil, fmt.Errorf("%w: Parquet field %q is not a list for %v", ErrSchemaMismatch, p.Name, t)
	}
	r := p.Children[0]
	var el *asm
	var err error
	_, structElem := t.Element.(value.StructType)
	switch {
	case r.IsLeaf(), len(r.Children) > 1, r.Name == "array", r.Name == p.Name+"_tuple",
		// A struct element whose one field sits right in the repeated
		// group: the group is the element (two-level), as parquet-mr infers.
		structElem && r.Children[0].IsLeaf():
		el, err = b.build(t.Element, r, true)
	default:
		el, err = b.build(t.Element, r.Children[0], false)
	}
	if err != nil {
		return nil, fmt.Errorf("element: %w", err)
	}
	if len(el.leaves) == 0 {
		return nil, fmt.Errorf("%w: list %q has no readable element column", ErrSchemaMismatch, p.Name)
	}
	return b.collection(asmList, p, r, []*asm{el}, p.Repetition() == format.Optional), nil
}

func (b *asmBuilder) buildMap(t value.MapType, p *TreeNode) (*asm, error) {
	kv := p
	optional := false
	if p.Repetition() != format.Repeated {
		if p.IsLeaf() || len(p.Children) != 1 || p.Children[0].Repetition() != format.Repeated {
			return nil, fmt.Errorf("%w: Parquet field %q is not a map for %v", ErrSchemaMismatch, p.Name, t)
		}
		kv = p.Children[0]
		optional = p.Repetition() == format.Optional
	}
	if kv.IsLeaf() || len(kv.Children) != 2 {
		return nil, fmt.Errorf("%w: map %q key_value group has no key and value", ErrSchemaMismatch, p.Name)
	}
	k, err := b.build(t.Key, kv.Children[0], false)
	if err != nil {
		return nil, fmt.Errorf("map key: %w", err)
	}
	v, err := b.build(t.Value, kv.Children[1], false)
	if err != nil {
		return nil, fmt.Errorf("map value: %w", err)
	}
	return b.collection(asmMap, p, kv, []*asm{k, v}, optional), nil
}
