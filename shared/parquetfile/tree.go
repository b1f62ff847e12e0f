package parquetfile

import (
	"fmt"
	"strings"

	"github.com/parquet-go/parquet-go/format"
)

// TreeNode is one element of a file's Parquet schema, in its tree.
type TreeNode struct {
	El       format.SchemaElement
	Name     string
	Children []*TreeNode
	Leaf     int // column index; -1 for groups
	Def      int // definition level at which this node is present
	Rep      int // repetition level of this node
}

// Repetition is the element's repetition type.
func (p *TreeNode) Repetition() format.FieldRepetitionType {
	r, _ := p.El.RepetitionType.Get()
	return r
}

// IsLeaf reports whether the element is a leaf column.
func (p *TreeNode) IsLeaf() bool { return p.Leaf >= 0 }

// Child finds the child of p that is a field of the given id, when id is
// positive; else the child of the given name, or of that name ignoring
// case, as Spark finds one.
func (p *TreeNode) Child(name string, id int) *TreeNode {
	if id > 0 {
		for _, c := range p.Children {
			if int(c.El.FieldID) == id {
				return c
			}
		}
	}
	for _, c := range p.Children {
		if c.Name == name {
			return c
		}
	}
	for _, c := range p.Children {
		if strings.EqualFold(c.Name, name) {
			return c
		}
	}
	return nil
}

// Tree rebuilds the schema tree from the footer's flat element list, and
// counts its leaves.
func Tree(els []format.SchemaElement) (*TreeNode, int, error) {
	if len(els) == 0 {
		return nil, 0, fmt.Errorf("parquet footer has no schema")
	}
	pos, leaves := 0, 0
	var build func(parentDef, parentRep int, isRoot bool) (*TreeNode, error)
	build = func(parentDef, parentRep int, isRoot bool) (*TreeNode, error) {
		if pos >= len(els) {
			return nil, fmt.Errorf("parquet schema is truncated")
		}
		el := els[pos]
		pos++
		n := &TreeNode{El: el, Name: el.Name, Leaf: -1, Def: parentDef, Rep: parentRep}
		if !isRoot {
			switch r, _ := el.RepetitionType.Get(); r {
			case format.Optional:
				n.Def++
			case format.Repeated:
				n.Def++
				n.Rep++
			}
		}
		nc, _ := el.NumChildren.Get()
		if _, typed := el.Type.Get(); typed && nc == 0 && !isRoot {
			n.Leaf = leaves
			leaves++
			return n, nil
		}
		for range nc {
			c, err := build(n.Def, n.Rep, false)
			if err != nil {
				return nil, err
			}
			n.Children = append(n.Children, c)
		}
		return n, nil
	}
	root, err := build(0, 0, true)
	return root, leaves, err
}
