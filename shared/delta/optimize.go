package delta

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
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
	// MaxDeletedShare is the share of a file's rows its deletion vector
	// may mark (the vector's cardinality over the file's numRecords, which
	// counts the marked rows too) before the file is rewritten without
	// them, whatever its size. 0 or less means DefaultMaxDeletedShare; 1
	// or more never rewrites a large file for its vector.
	MaxDeletedShare float64
	// BloomFilterColumns and PageBytes are those of the files written (see
	// WriteOptions): compaction keeps the lookup aids merges give a table's
	// files, or a compacted file would be read whole by every lookup.
	BloomFilterColumns []string
	PageBytes          int
	// FanIn caps how many files are read at once (see ReadMerged); 0
	// means DefaultMergeFanIn.
	FanIn int
	// SeparateNulls names a column whose null rows and non-null rows are
	// written to separate files, each group clustered by ClusterBy on its
	// own: a reader that wants only one group skips the other's files by
	// their null counts (an scd2 table keeps its open versions, null
	// valid-to, apart from the closed ones a merge never needs). A file
	// whose statistics show both groups is rewritten whatever its size.
	// "" keeps the rows together.
	SeparateNulls string
	// MaxBytes caps the bytes of the files one call rewrites (0: no cap):
	// bins are taken in the order optimizeOrder gives until the next one
	// would pass the cap, and at least one is, so repeated calls always
	// progress. What is left is reported (OptimizeResult.FilesLeft) for
	// the next call. A table whose files all pass the deletion vector
	// threshold together (random updates fill every file's vector at the
	// same pace) is then folded a few files per call instead of all at
	// once, and a call stays within a function's timeout however large
	// the table.
	MaxBytes int64
	// Now stamps the removes; nil means the table's clock.
	Now func() time.Time
	// DryRun plans the rewrite and reports it, counting the files and
	// bytes it would remove, without writing or committing anything.
	DryRun bool
}

// DefaultMaxDeletedShare is the deleted share past which Optimize folds a
// file's deletion vector into a rewrite. Spark's OPTIMIZE uses 5%
// (optimize.maxDeletedRowsRatio) for a command run now and then; ours runs
// after merges that mark rows at random in many files, where 5% would
// rewrite a file after a few batches and give back most of what deletion
// vectors save. At 20% a scan reads at most a quarter more rows than it
// returns.
const DefaultMaxDeletedShare = 0.2

// OptimizeResult reports what Optimize committed.
type OptimizeResult struct {
	// FilesRemoved files were rewritten into FilesAdded files.
	FilesRemoved, FilesAdded int
	// DeletionVectorsPurged counts the removed files that had a deletion
	// vector, and RowsPurged the rows those vectors marked: rows no
	// longer stored.
	DeletionVectorsPurged int
	RowsPurged            int64
	// BytesRemoved and BytesAdded are the sizes of those files.
	BytesRemoved, BytesAdded int64
	// Version is the version committed; 0 when nothing was (a table's
	// first version is never an OPTIMIZE), as on a dry run.
	Version int64
	// FilesLeft files of BytesLeft bytes were due but left to a later
	// call by OptimizeOptions.MaxBytes.
	FilesLeft int
	BytesLeft int64
}

// Optimize bin-packs the small files of the snapshot, partition by
// partition, into files of about opts.TargetFileBytes, and commits the
// result as an OPTIMIZE with dataChange=false: it rearranges rows and
// changes none. It also folds deletion vectors (PROTOCOL.md "Deletion
// Vectors"): a file whose vector marks more than opts.MaxDeletedShare of
// its rows, or that has a vector and no numRecords statistic, is rewritten
// whatever its size, and small files with a vector join the bins like any
// other; the output holds only their live rows and has no vector. As in
// Spark's OPTIMIZE, a bin is rewritten when it holds two files or more, or
// one with a deletion vector. A file rewritten alone goes through
// RewriteFile, which copies the row groups its vector spares verbatim;
// bins of several stream through ReadMerged: a bounded buffer per file
// read, never a whole file, and at most opts.FanIn files read at once,
// however many a bin holds. With opts.SeparateNulls, files are binned by
// what their statistics show of the column (null rows, other rows, both),
// a file showing both is rewritten whatever its size, and a bin's null
// rows and other rows are written to separate files. Nothing is committed
// when there is nothing to rewrite.
func (s *Snapshot) Optimize(ctx context.Context, opts OptimizeOptions) (OptimizeResult, error) {
	target := opts.TargetFileBytes
	maxShare := opts.MaxDeletedShare
	if maxShare <= 0 {
		maxShare = DefaultMaxDeletedShare
	}
	schema := s.Schema()
	split := -1 // the column of SeparateNulls
	// nulls tells a file's group: whether it holds null rows of the
	// column, and whether it holds others. Files are binned with their
	// group, or two small files of different groups would be rewritten
	// into two again at every compaction.
	nulls := func(Add) (bool, bool) { return false, false }
	if c := opts.SeparateNulls; c != "" {
		if split = schema.Index(c); split < 0 {
			return OptimizeResult{}, fmt.Errorf("separate nulls: %w %q", ErrUnknownColumn, c)
		}
		// Statistics name columns physically (PROTOCOL.md "Column Mapping").
		phys := PhysicalName(schema.Fields[split], ColumnMappingMode(s.Metadata()))
		nulls = func(f Add) (bool, bool) { return nullGroups(f, phys) }
	}
	mixed := func(f Add) bool { n, v := nulls(f); return n && v }
	groups := map[string][]Add{}
	var order []string
	for _, f := range s.Files() {
		if f.Size >= target/4 && !foldDeletionVector(f, maxShare) && !mixed(f) {
			continue
		}
		k := partitionGroup(f.PartitionValues)
		if n, v := nulls(f); n != v {
			k += fmt.Sprintf("\x00nulls=%v", n)
		}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], f)
	}
	sort.Strings(order)
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
	var work [][]Add
	for _, k := range order {
		// Smallest first: in path order (random names) a small file
		// between two large ones would make a bin of its own, which is
		// not rewritten, and stay small however many runs come.
		// A bin's files go back to snapshot order, which breaks the ties
		// of a clustered rewrite.
		slices.SortStableFunc(groups[k], func(a, b Add) int { return cmp.Compare(a.Size, b.Size) })
		for _, bin := range PackBins(groups[k], target, 0) {
			slices.SortFunc(bin, func(a, b Add) int { return strings.Compare(a.Path, b.Path) })
			if len(bin) >= 2 || bin[0].DeletionVector != nil || mixed(bin[0]) {
				work = append(work, bin)
			}
		}
	}
	if len(work) == 0 {
		return OptimizeResult{}, nil
	}
	var left [][]Add
	if opts.MaxBytes > 0 {
		work, left = budget(optimizeOrder(work), opts.MaxBytes)
	}
	// Refuse before writing files the commit would refuse.
	if err := s.Protocol().CheckWrite(s.Metadata()); err != nil {
		return OptimizeResult{}, fmt.Errorf("optimize %s: %w", s.Store().URL(), err)
	}
	if opts.DryRun {
		return withLeft(planned(work), left), nil
	}
	var removes []Remove
	var adds []Add
	for _, bin := range work {
		var a []Add
		var err error
		if len(bin) == 1 && !mixed(bin[0]) {
			a, err = s.rewriteAlone(ctx, bin[0], target, opts)
		} else {
			a, err = s.rewriteMerged(ctx, bin, MergeOptions{Less: less, FanIn: opts.FanIn}, split, target, opts)
		}
		if err != nil {
			return OptimizeResult{}, err
		}
		for _, f := range bin {
			// The remove carries the vector: the logical file is the
			// pair of path and vector.
			removes = append(removes, f.Remove(now.UnixMilli(), false))
		}
		adds = append(adds, a...)
	}
	res := withLeft(planned(work), left)
	tx := s.NewTransaction(Operation{Name: "OPTIMIZE", Parameters: map[string]string{"predicate": "[]", "zOrderBy": "[]", "auto": "true"}})
	for _, r := range removes {
		tx.ReadFiles(r.Path)
	}
	tx.Remove(removes...)
	tx.Add(adds...)
	metrics := map[string]string{"numRemovedFiles": strconv.Itoa(len(removes)), "numAddedFiles": strconv.Itoa(len(adds))}
	if res.DeletionVectorsPurged > 0 {
		// Spark's OPTIMIZE metric names.
		metrics["numDeletionVectorsRemoved"] = strconv.Itoa(res.DeletionVectorsPurged)
		metrics["numDeletionVectorRowsRemoved"] = strconv.FormatInt(res.RowsPurged, 10)
	}
	tx.SetMetrics(metrics)
	committed, err := tx.Commit(ctx)
	if err != nil {
		return OptimizeResult{}, err
	}
	res.FilesAdded, res.Version = len(adds), committed.Version()
	for _, a := range adds {
		res.BytesAdded += a.Size
	}
	return res, nil
}

// planned counts what rewriting the bins of work removes: files, bytes,
// and the deletion vectors folded with the rows they mark.
func planned(work [][]Add) OptimizeResult {
	var res OptimizeResult
	for _, bin := range work {
		for _, f := range bin {
			res.FilesRemoved++
			res.BytesRemoved += f.Size
			if f.DeletionVector != nil {
				res.DeletionVectorsPurged++
				res.RowsPurged += f.DeletionVector.Cardinality
			}
		}
	}
	return res
}

// withLeft is res with the bins left for a later call counted.
func withLeft(res OptimizeResult, left [][]Add) OptimizeResult {
	for _, bin := range left {
		res.FilesLeft += len(bin)
		res.BytesLeft += binBytes(bin)
	}
	return res
}

// optimizeOrder orders the bins of work for a capped call (MaxBytes): the
// bins of several small files first, smallest first, then the files
// rewritten alone, the largest deleted share first. Small files cost every
// merge a read and are cheap to pack, so a storm of folds never holds them
// back; the most-deleted files are the ones whose fold purges the most
// rows per byte rewritten, and whose vectors cost readers the most. The
// order is total (ties by path), so two calls on one snapshot agree.
func optimizeOrder(work [][]Add) [][]Add {
	type ranked struct {
		bin   []Add
		alone bool
		size  int64
		share float64
	}
	rs := make([]ranked, len(work))
	for i, bin := range work {
		r := ranked{bin: bin, alone: len(bin) == 1, size: binBytes(bin)}
		if r.alone {
			r.share = deletedShare(bin[0])
		}
		rs[i] = r
	}
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.alone != b.alone {
			return !a.alone
		}
		if !a.alone {
			if a.size != b.size {
				return a.size < b.size
			}
		} else if a.share != b.share {
			return a.share > b.share
		}
		return a.bin[0].Path < b.bin[0].Path
	})
	out := make([][]Add, len(rs))
	for i, r := range rs {
		out[i] = r.bin
	}
	return out
}

// deletedShare is the share of f's rows its deletion vector marks: 0
// without a vector, 1 (first to fold) when f has no numRecords to tell.
func deletedShare(f Add) float64 {
	if f.DeletionVector == nil {
		return 0
	}
	n, ok := statsNumRecords(f.Stats)
	if !ok || n <= 0 {
		return 1
	}
	return float64(f.DeletionVector.Cardinality) / float64(n)
}

// budget splits ordered bins into those one call rewrites within maxBytes
// (0: all), at least the first, and those it leaves.
func budget(work [][]Add, maxBytes int64) (take, left [][]Add) {
	if maxBytes <= 0 {
		return work, nil
	}
	var used int64
	for i, bin := range work {
		size := binBytes(bin)
		if i > 0 && used+size > maxBytes {
			return work[:i], work[i:]
		}
		used += size
	}
	return work, nil
}

// binBytes is the size of a bin's files.
func binBytes(bin []Add) int64 {
	var n int64
	for _, f := range bin {
		n += f.Size
	}
	return n
}

// foldDeletionVector reports whether f's deletion vector marks more than
// maxShare of its rows, or f has a vector and no numRecords to tell (as
// Spark does, such a file is rewritten so that its output has statistics).
func foldDeletionVector(f Add, maxShare float64) bool {
	dv := f.DeletionVector
	if dv == nil {
		return false
	}
	n, ok := statsNumRecords(f.Stats)
	return !ok || n <= 0 || float64(dv.Cardinality) > maxShare*float64(n)
}

// PackBins groups files, in order, into bins of about targetBytes and at
// most maxFiles files (0: no limit), a bin closing before the file that
// would take it past either; a file as large as targetBytes is a bin of its
// own. Compaction rewrites each bin into new files.
func PackBins(files []Add, targetBytes int64, maxFiles int) [][]Add {
	var bins [][]Add
	var cur []Add
	var size int64
	for _, f := range files {
		if len(cur) > 0 && (size+f.Size > targetBytes || len(cur) == maxFiles) {
			bins = append(bins, cur)
			cur, size = nil, 0
		}
		cur = append(cur, f)
		size += f.Size
	}
	if len(cur) > 0 {
		bins = append(bins, cur)
	}
	return bins
}

// rewriteAlone rewrites one file without the rows its deletion vector
// marks, in its own order (sorted already), into files of about target
// bytes (dataChange=false).
func (s *Snapshot) rewriteAlone(ctx context.Context, f Add, target int64, opts OptimizeOptions) ([]Add, error) {
	md := s.Metadata()
	res, err := RewriteFile(ctx, s.Store(), md, f, RewriteOptions{
		Write:           WriteOptions{Schema: s.Schema(), PartitionColumns: md.PartitionColumns, Configuration: md.Configuration, BloomFilterColumns: opts.BloomFilterColumns, PageBytes: opts.PageBytes},
		TargetFileBytes: target,
	})
	if err != nil {
		return nil, err
	}
	return res.Adds, nil
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

// nullGroups reports whether f's statistics show null values in the
// column whose statistics are named col, and whether they show others;
// neither when they do not tell (a column past the ones with statistics,
// see DefaultStatsColumns): such a file is left as it is, or compaction
// would rewrite it every time.
func nullGroups(f Add, col string) (nulls, values bool) {
	st, err := ParseStats(f.Stats)
	if err != nil {
		return false, false
	}
	n, ok := st.NullCountOf(col)
	if !ok {
		return false, false
	}
	return n > 0, n < st.NumRecords
}

// rewriteMerged streams the rows of files, merged as mo says, into new
// files of about target bytes (dataChange=false); with split at 0 or more,
// the rows whose column split is null go to files of their own, each
// group in the merged order.
func (s *Snapshot) rewriteMerged(ctx context.Context, files []Add, mo MergeOptions, split int, target int64, opts OptimizeOptions) ([]Add, error) {
	md := s.Metadata()
	schema := s.Schema()
	var writers [2]*RollingWriter // [0] all rows, or the non-null ones; [1] the null ones
	err := ReadMerged(ctx, s.Store(), md, files, mo, func(row []any) error {
		g := 0
		if split >= 0 && row[split] == nil {
			g = 1
		}
		w := writers[g]
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
			w = NewRollingWriter(ctx, s.Store(), WriteOptions{Schema: schema, PartitionColumns: md.PartitionColumns, PartitionValues: pv, Configuration: md.Configuration, BloomFilterColumns: opts.BloomFilterColumns, PageBytes: opts.PageBytes}, target)
			writers[g] = w
		}
		return w.Write(row)
	})
	var adds []Add
	for _, w := range writers {
		if w == nil {
			continue // no row of its group: nothing written
		}
		if err != nil {
			w.Abort()
			continue
		}
		a, cerr := w.Close()
		if cerr != nil {
			err = cerr
			continue
		}
		adds = append(adds, a...)
	}
	if err != nil {
		return nil, err
	}
	return adds, nil
}
