package parquetfile

import "testing"

func TestFlatReadCoversFlatSchemasOnly(t *testing.T) {
	s1, s2 := &colStream{leaf: 0}, &colStream{leaf: 1}
	leaf := func(s *colStream, def int) *asm {
		return &asm{kind: asmLeaf, stream: s, maxDef: def, nullDef: def, leaves: []*colStream{s}, first: s}
	}
	tests := []struct {
		name string
		out  []*asm
		flat bool
	}{
		{"required and optional leaves and constants are flat", []*asm{leaf(s1, 0), {kind: asmConst}, leaf(s2, 1)}, true},
		{"a struct is not", []*asm{leaf(s1, 1), {kind: asmStruct, children: []*asm{leaf(s2, 2)}}}, false},
		{"a list is not", []*asm{{kind: asmList, children: []*asm{leaf(s1, 2)}}}, false},
		{"a leaf read twice is not", []*asm{leaf(s1, 0), leaf(s1, 0)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := newFlatReader(tc.out, nil, false) != nil; got != tc.flat {
				t.Errorf("flat = %v, want %v", got, tc.flat)
			}
		})
	}
}
