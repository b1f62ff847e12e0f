package main

import (
	"cloud.google.com/go/monitoring/dashboard/apiv1/dashboardpb"
)

// maxColumns is the widest mosaic the API takes (the REST reference of
// MosaicLayout says 1 to 48; the proto comment still says 12).
const maxColumns = 48

type rect struct{ x, y, w, h int32 }

func (a rect) overlaps(b rect) bool {
	return a.x < b.x+b.w && b.x < a.x+a.w && a.y < b.y+b.h && b.y < a.y+a.h
}

func (a rect) contains(b rect) bool {
	return a.x <= b.x && b.x+b.w <= a.x+a.w && a.y <= b.y && b.y+b.h <= a.y+a.h
}

// checkLayout checks that the tiles fit the columns, that no two charts
// (or two groups) overlap, and, when there are collapsible groups, that
// every other tile lies inside exactly one: a group takes the tiles in its
// area, and a tile across two groups folds with neither as intended.
func checkLayout(m *dashboardpb.MosaicLayout, rep *report) {
	cols := m.GetColumns()
	if cols < 1 || cols > maxColumns {
		rep.addf("mosaicLayout.columns is %d, must be 1 to %d", cols, maxColumns)
	}
	type placed struct {
		rect
		title string
	}
	var groups, others []placed
	for i, t := range m.GetTiles() {
		r := rect{t.GetXPos(), t.GetYPos(), t.GetWidth(), t.GetHeight()}
		title := t.GetWidget().GetTitle()
		switch {
		case r.w < 1 || r.h < 1:
			rep.addf("tile %d (%q) is %dx%d: width and height must be at least 1", i, title, r.w, r.h)
		case r.x < 0 || r.y < 0:
			rep.addf("tile %d (%q) is at (%d,%d): positions cannot be negative", i, title, r.x, r.y)
		case r.x+r.w > cols:
			rep.addf("tile %d (%q) spans columns %d to %d of %d", i, title, r.x, r.x+r.w, cols)
		}
		if t.GetWidget() == nil {
			rep.addf("tile %d has no widget", i)
			continue
		}
		if t.GetWidget().GetCollapsibleGroup() != nil {
			groups = append(groups, placed{r, title})
		} else {
			others = append(others, placed{r, title})
		}
	}
	rep.Tiles = len(m.GetTiles())
	for _, set := range [][]placed{groups, others} {
		for i := range set {
			for j := i + 1; j < len(set); j++ {
				if set[i].overlaps(set[j].rect) {
					rep.addf("tiles %q and %q overlap", set[i].title, set[j].title)
				}
			}
		}
	}
	if len(groups) == 0 {
		return
	}
	for _, o := range others {
		n := 0
		for _, g := range groups {
			if g.contains(o.rect) {
				n++
			}
		}
		if n != 1 {
			rep.addf("tile %q lies inside %d collapsible groups, want 1", o.title, n)
		}
	}
}
