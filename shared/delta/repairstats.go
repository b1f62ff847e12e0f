package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/dsdelta/dsdelta/shared/parquetfile"
	"github.com/dsdelta/dsdelta/shared/value"
)

// Repairing the statistics older releases wrote wrong, on the columns
// whose Parquet bounds are not their Delta ones (see boundsAsDelta):
//   - a Parquet footer with the chunk bounds of a decimal of more than 18
//     digits, which parquet-go before v0.32.1 took in unsigned order (see
//     unsignedDecimalStats): a reader pruning row groups by them skips
//     rows it wants. The file is rewritten, those row groups written anew;
//   - an add.stats whose float, double or wide-decimal bounds are not
//     values of the file's rows: a rewrite that dropped rows kept the
//     source's bounds (see exactbounds.go). PROTOCOL.md "Per-file
//     Statistics" has readers take them as present in the file (tight)
//     unless tightBounds is false. The file is added again with the
//     bounds of its rows, as Spark's statistics recomputation does; its
//     data is not touched.
//
// Only files dsdelta wrote (created_by) are looked at: the faults are
// ours, and a file of another writer keeps the statistics it came with.

// RepairStatsOptions tune RepairStats.
type RepairStatsOptions struct {
	// BloomFilterColumns and PageBytes configure the files rewritten, as
	// OptimizeOptions' do.
	BloomFilterColumns []string
	PageBytes          int
	// DryRun finds what would be repaired, writing nothing.
	DryRun bool
	// Now stamps the removes; nil means the table's clock.
	Now func() time.Time
}

// RepairStatsResult is what RepairStats found and did.
type RepairStatsResult struct {
	// FilesChecked counts the files dsdelta wrote that were read.
	FilesChecked int
	// Rewritten are the files whose footer had unsigned wide-decimal
	// bounds, rewritten into FilesAdded files.
	Rewritten []string
	// Restated are the files added again with the bounds of their rows.
	Restated   []string
	FilesAdded int
	// BytesRemoved and BytesAdded are the sizes of the files rewritten
	// and of their replacements.
	BytesRemoved, BytesAdded int64
	// Version is the version committed; 0 when none was.
	Version int64
}

// RepairStats finds the files of the snapshot whose statistics an older
// release wrote wrong (see above) and repairs them in one commit that
// reads them all: a concurrent commit that removed one wins, and the
// repair fails with ErrConflict, to be run again. A clean table gets no
// commit.
func (s *Snapshot) RepairStats(ctx context.Context, opts RepairStatsOptions) (RepairStatsResult, error) {
	var res RepairStatsResult
	md := s.Metadata()
	if err := s.Protocol().CheckWrite(md); err != nil {
		return res, fmt.Errorf("repair stats of %s: %w", s.Store().URL(), err)
	}
	cols := suspectColumns(s.Schema(), md)
	if len(cols) == 0 {
		return res, nil
	}
	var rewrite []Add
	restate := map[string]Add{}
	var order []string
	for _, f := range s.Files() {
		check, err := s.checkFileStats(ctx, f, cols)
		if err != nil {
			return RepairStatsResult{}, fmt.Errorf("repair stats of %s: %s: %w", s.Store().URL(), f.Path, err)
		}
		if check.ours {
			res.FilesChecked++
		}
		switch {
		case check.unsignedFooter:
			rewrite = append(rewrite, f)
			res.Rewritten = append(res.Rewritten, f.Path)
			res.BytesRemoved += f.Size
		case check.stats != "":
			a := f
			a.Stats, a.DataChange = check.stats, false
			restate[f.Path] = a
			order = append(order, f.Path)
			res.Restated = append(res.Restated, f.Path)
		}
	}
	if opts.DryRun || len(rewrite)+len(restate) == 0 {
		return res, nil
	}
	v, err := s.commitRepair(ctx, opts, rewrite, restate, order, &res)
	if err != nil {
		return RepairStatsResult{}, fmt.Errorf("repair stats of %s: %w", s.Store().URL(), err)
	}
	res.Version = v
	return res, nil
}

// commitRepair rewrites the files of rewrite, adds those of restate again
// (in order), and commits both.
func (s *Snapshot) commitRepair(ctx context.Context, opts RepairStatsOptions, rewrite []Add, restate map[string]Add, order []string, res *RepairStatsResult) (int64, error) {
	md := s.Metadata()
	now := s.table.now()
	if opts.Now != nil {
		now = opts.Now()
	}
	tx := s.NewTransaction(Operation{Name: "COMPUTE STATS", Parameters: map[string]string{"predicate": "[]"}})
	var written []Add
	for _, f := range rewrite {
		rw, err := RewriteFile(ctx, s.Store(), md, f, RewriteOptions{
			Write: WriteOptions{Schema: s.Schema(), PartitionColumns: md.PartitionColumns, BloomFilterColumns: opts.BloomFilterColumns, PageBytes: opts.PageBytes},
		})
		if err != nil {
			DiscardFiles(ctx, s.Store(), written)
			return 0, fmt.Errorf("rewrite %s: %w", f.Path, err)
		}
		written = append(written, rw.Adds...)
		tx.ReadFiles(f.Path)
		tx.Remove(f.Remove(now.UnixMilli(), false))
	}
	for _, a := range written {
		res.BytesAdded += a.Size
	}
	res.FilesAdded = len(written)
	tx.Add(written...)
	for _, p := range order {
		// Read, so that a commit removing the file meanwhile conflicts
		// instead of being undone by this add.
		tx.ReadFiles(p)
		tx.Add(restate[p])
	}
	tx.SetMetrics(map[string]string{
		"numRemovedFiles":  strconv.Itoa(len(rewrite)),
		"numAddedFiles":    strconv.Itoa(len(written)),
		"numRestatedFiles": strconv.Itoa(len(order)),
	})
	committed, err := tx.Commit(ctx)
	if err != nil {
		DiscardFiles(ctx, s.Store(), written)
		return 0, err
	}
	return committed.Version(), nil
}

// suspectColumn is a top-level data column whose bounds may be wrong.
type suspectColumn struct {
	field value.Field
	key   string // its name in the stats and the file
}

// suspectColumns are the columns of schema whose Parquet bounds are not
// their Delta ones: floats, doubles and wide decimals, partition columns
// excepted.
func suspectColumns(schema value.StructType, md Metadata) []suspectColumn {
	part := map[string]bool{}
	for _, c := range md.PartitionColumns {
		part[c] = true
	}
	var cols []suspectColumn
	for _, f := range schema.Fields {
		if part[f.Name] || !hasMinMax(f.Type) || boundsAsDelta(f.Type) {
			continue
		}
		if _, ok := f.Type.(value.StructType); ok {
			continue
		}
		cols = append(cols, suspectColumn{field: f, key: PhysicalName(f, ColumnMappingMode(md))})
	}
	return cols
}

// fileStatsCheck is what checkFileStats found of one file.
type fileStatsCheck struct {
	ours           bool   // dsdelta wrote it
	unsignedFooter bool   // its footer has unsigned wide-decimal bounds
	stats          string // its add.stats with the bounds of its rows; "" when right
}

// checkFileStats reads f's footer and, where its add.stats claims tight
// bounds of cols, the values of cols.
func (s *Snapshot) checkFileStats(ctx context.Context, f Add, cols []suspectColumn) (fileStatsCheck, error) {
	var c fileStatsCheck
	name, err := decodeAddPath(f.Path)
	if err != nil {
		return c, err
	}
	ra, err := parquetfile.Open(ctx, s.Store(), name, f.Size)
	if err != nil {
		return c, err
	}
	pf := ra.Parquet()
	fmd := pf.Metadata()
	if c.ours = parquetfile.WrittenByDsdelta(fmd.CreatedBy); !c.ours {
		return c, nil
	}
	root, _, err := parquetfile.Tree(fmd.Schema)
	if err != nil {
		return c, err
	}
	for _, col := range cols {
		p := childField(root, col.field, ColumnMappingMode(s.Metadata()))
		if p == nil || !p.IsLeaf() || !wideDecimal(col.field.Type) {
			continue
		}
		for _, rg := range fmd.RowGroups {
			if p.Leaf < len(rg.Columns) {
				if unsignedDecimalStats(&rg.Columns[p.Leaf].MetaData.Statistics) {
					c.unsignedFooter = true
					return c, nil
				}
			}
		}
	}
	st, err := ParseStats(f.Stats)
	if err != nil || f.DeletionVector != nil || st.TightBounds != nil && !*st.TightBounds {
		return c, nil // no bounds, or bounds that claim no more than wide
	}
	c.stats, err = s.restatedBounds(ctx, f, st, cols)
	return c, err
}

// restatedBounds reads the values of cols in f and returns f's stats with
// their bounds, or "" when every bound st records is right. A bound st
// leaves out is no claim, and stays out.
func (s *Snapshot) restatedBounds(ctx context.Context, f Add, st Stats, cols []suspectColumn) (string, error) {
	var claimed []suspectColumn
	var names []string
	for _, col := range cols {
		_, lo := st.MinValues[col.key]
		_, hi := st.MaxValues[col.key]
		if lo || hi {
			claimed = append(claimed, col)
			names = append(names, col.field.Name)
		}
	}
	if len(claimed) == 0 {
		return "", nil
	}
	nodes := make([]*statsNode, len(claimed))
	for i, col := range claimed {
		nodes[i] = &statsNode{key: col.key, index: i, typ: col.field.Type, minMax: true}
	}
	err := ReadFile(ctx, s.Store(), s.Metadata(), f, ReadOptions{Columns: names}, func(row []any) error {
		for _, n := range nodes {
			n.add(row[n.index])
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	wrong := false
	for _, n := range nodes {
		for _, kind := range []statKind{statMin, statMax} {
			bounds := st.MinValues
			if kind == statMax {
				bounds = st.MaxValues
			}
			raw, claimed := bounds[n.key]
			exact, ok := n.leafJSON(kind)
			switch {
			case !claimed:
			case !ok:
				delete(bounds, n.key)
				wrong = true
			case !sameBound(raw, exact, n.typ, kind == statMax):
				bounds[n.key] = json.RawMessage(exact)
				wrong = true
			}
		}
	}
	if !wrong {
		return "", nil
	}
	b, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("encode stats: %w", err)
	}
	return string(b), nil
}

// sameBound reports whether a recorded bound is the exact one: the same
// JSON, or the same value written another way.
func sameBound(recorded json.RawMessage, exact []byte, t value.Type, upper bool) bool {
	if bytes.Equal(bytes.TrimSpace(recorded), exact) {
		return true
	}
	a, errA := parseStatValue(recorded, t, upper)
	b, errB := parseStatValue(exact, t, upper)
	return errA == nil && errB == nil && value.Compare(a, b) == 0
}
