package delta

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/dsdelta/dsdelta/shared/value"
)

// OptimizeOptions configure Snapshot.Optimize.
type OptimizeOptions struct {
	// TargetFileBytes is the size of the files written; files smaller than
	// a quarter of it are the small files that get compacted.
	TargetFileBytes int64
	// ClusterBy names the columns, in order, by which the rows of the
	// files compacted together are merged, each file being sorted by them
	// already (as merges and compaction write them): the output is then
	// clustered. With none, the files are concatenated.
	ClusterBy []string
	// FanIn caps how many files are read at once (see ReadMerged); 0
	// means DefaultMergeFanIn.
	FanIn int
	// Now stamps the removes; nil means the table's clock.
	Now func() time.Time
}

// OptimizeResult reports what Optimize committed.
type OptimizeResult struct {
	// FilesRemoved small files were rewritten into FilesAdded files.
	FilesRemoved, FilesAdded int
}

// Optimize bin-packs the small files of the snapshot, partition by
// partition, into files of about opts.TargetFileBytes, and commits the
// result as an OPTIMIZE with dataChange=false: it rearranges rows and
// changes none. Files with a deletion vector are left alone. Rows stream
// through ReadMerged: a bounded buffer per file read, never a whole file,
// and at most opts.FanIn files read at once, however many a bin holds.
// Nothing is committed when no partition has two small files.
func (s *Snapshot) Optimize(ctx context.Context, opts OptimizeOptions) (OptimizeResult, error) {
	target := opts.TargetFileBytes
	groups := map[string][]Add{}
	var order []string
	for _, f := range s.Files() {
		if f.Size >= target/4 || f.DeletionVector != nil {
			continue
		}
		k := partitionGroup(f.PartitionValues)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], f)
	}
	sort.Strings(order)
	schema := s.Schema()
	var less func(a, b []any) bool
	if len(opts.ClusterBy) > 0 {
		cols := make([]int, len(opts.ClusterBy))
		for i, c := range opts.ClusterBy {
			if cols[i] = schema.Index(c); cols[i] < 0 {
				return OptimizeResult{}, fmt.Errorf("cluster by: %w %q", ErrUnknownColumn, c)
			}
		}
		less = func(a, b []any) bool {
			for _, k := range cols {
				if c := value.Compare(a[k], b[k]); c != 0 {
					return c < 0
				}
			}
			return false
		}
	}
	now := s.table.now()
	if opts.Now != nil {
		now = opts.Now()
	}
	var removes []Remove
	var adds []Add
	for _, k := range order {
		files := groups[k]
		if len(files) < 2 {
			continue
		}
		// Bins of about the target size.
		var bins [][]Add
		var cur []Add
		var size int64
		for _, f := range files {
			if size+f.Size > target && len(cur) > 0 {
				bins = append(bins, cur)
				cur, size = nil, 0
			}
			cur = append(cur, f)
			size += f.Size
		}
		bins = append(bins, cur)
		for _, bin := range bins {
			if len(bin) < 2 {
				continue
			}
			a, err := s.rewriteMerged(ctx, bin, MergeOptions{Less: less, FanIn: opts.FanIn}, target)
			if err != nil {
				return OptimizeResult{}, err
			}
			for _, f := range bin {
				removes = append(removes, f.Remove(now.UnixMilli(), false))
			}
			adds = append(adds, a...)
		}
	}
	if len(removes) == 0 {
		return OptimizeResult{}, nil
	}
	tx := s.NewTransaction(Operation{Name: "OPTIMIZE", Parameters: map[string]string{"predicate": "[]", "zOrderBy": "[]", "auto": "true"}})
	for _, r := range removes {
		tx.ReadFiles(r.Path)
	}
	tx.Remove(removes...)
	tx.Add(adds...)
	tx.SetMetrics(map[string]string{"numRemovedFiles": strconv.Itoa(len(removes)), "numAddedFiles": strconv.Itoa(len(adds))})
	if _, err := tx.Commit(ctx); err != nil {
		return OptimizeResult{}, err
	}
	return OptimizeResult{FilesRemoved: len(removes), FilesAdded: len(adds)}, nil
}

// partitionGroup identifies a partition by the partition values of an add.
func partitionGroup(pv map[string]*string) string {
	keys := make([]string, 0, len(pv))
	for k := range pv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := ""
	for _, k := range keys {
		v := "\x00null"
		if pv[k] != nil {
			v = *pv[k]
		}
		s += k + "=" + v + "/"
	}
	return s
}

// rewriteMerged streams the rows of files, merged as mo says, into new
// files of about target bytes (dataChange=false).
func (s *Snapshot) rewriteMerged(ctx context.Context, files []Add, mo MergeOptions, target int64) ([]Add, error) {
	md := s.Metadata()
	schema := s.Schema()
	var w *RollingWriter
	err := ReadMerged(ctx, s.Store(), md, files, mo, func(row []any) error {
		if w == nil {
			// Each output file holds one partition; its values come from
			// the first row (all inputs share them).
			pv := map[string]any{}
			for _, c := range md.PartitionColumns {
				if fi := schema.Index(c); fi >= 0 {
					pv[c] = row[fi]
				}
			}
			// dataChange=false: compaction rearranges rows, it changes none.
			w = NewRollingWriter(ctx, s.Store(), WriteOptions{Schema: schema, PartitionColumns: md.PartitionColumns, PartitionValues: pv}, target)
		}
		return w.Write(row)
	})
	if w == nil {
		return nil, err // no row at all: nothing written
	}
	if err != nil {
		w.Abort()
		return nil, err
	}
	return w.Close()
}
