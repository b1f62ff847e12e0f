package cdc

import (
	"bytes"
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"time"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

// Defaults of Replay.
const (
	// DefaultReplayMaxKeys keeps a verify pass under 100 MiB of keys.
	DefaultReplayMaxKeys = 1 << 20
	// DefaultReplayMaxBytes bounds what a pass holds for its keys.
	DefaultReplayMaxBytes = 128 << 20
)

// Replay replays a table's history into the state it implies, for Verify
// and Rebuild, with memory bounded whatever the table's size: it makes
// passes over ranges of keys, each holding at most MaxKeys keys and
// MaxBytes for them, and reads the history once per pass. The ranges come
// from a sample of the keys taken first (skipped when the tables' record
// counts show that every key fits in one pass); a pass that outgrows its
// bounds anyway gives up the upper half of its range to the next one.
// Ranges follow the key order, so a rebuild writes its rows sorted by key,
// as compaction clusters them.
type Replay struct {
	// MaxKeys bounds the keys a pass holds (default DefaultReplayMaxKeys).
	MaxKeys int
	// MaxBytes bounds the memory a pass holds for its keys (default
	// DefaultReplayMaxBytes). A verify pass holds about 100 bytes per key;
	// a rebuild pass also holds each key's winning row, so wide rows make
	// its passes smaller than MaxKeys.
	MaxBytes int64
	// TargetFileBytes is the size Rebuild rolls data files at (default
	// 128 MiB).
	TargetFileBytes int64
	// Now is the clock of Rebuild's tombstones and commits; default
	// time.Now.
	Now func() time.Time
	// Logger receives progress, a line per pass; default slog.Default().
	Logger *slog.Logger
	// Mode is the mode Rebuild recreates the current-state table in;
	// empty: the table's own (TableMode). Verify always checks a table
	// against its own mode.
	Mode Mode
}

func (r *Replay) defaults() {
	if r.MaxKeys <= 0 {
		r.MaxKeys = DefaultReplayMaxKeys
	}
	if r.MaxBytes <= 0 {
		r.MaxBytes = DefaultReplayMaxBytes
	}
	if r.TargetFileBytes <= 0 {
		r.TargetFileBytes = 128 << 20
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
}

const (
	// sampleKeys is the size of the key sample that plans the passes:
	// a few MiB, and a few hundred sampled keys per pass up to about a
	// hundred passes.
	sampleKeys = 1 << 15
	// passFill is the share of a pass's bounds the plan aims at, so that
	// sampling error rarely makes a pass give up half its range.
	passFill = 0.8
	// Guesses of what a pass holds per key until a pass has measured it.
	verifyKeyBytes  = 128
	rebuildKeyBytes = 512
)

// replayRun is one Verify or Rebuild of one table.
type replayRun struct {
	Replay
	t        TableSet
	id       string
	hsnap    *delta.Snapshot
	source   value.StructType
	conform  conformer // history rows as stored to HistorySchema(source)
	key      []string
	keyIdx   []int // key columns in source
	keepRows bool  // rebuild: a pass keeps each key's winning row
	// mode is the table mode replayed. Modes other than current keep
	// every change of a key (collect) and apply the mode's rule once the
	// pass has read them all (settle, modeRows).
	mode     Mode
	seed     maphash.Seed
	sumSeeds [2]maphash.Seed
	perKey   float64 // bytes a pass held per key, measured
	buf      []byte
}

func newReplayRun(r Replay, t TableSet, hsnap *delta.Snapshot, key []string, keepRows bool, mode Mode) (*replayRun, error) {
	r.defaults()
	hs := hsnap.Schema()
	source := SourceSchema(hs)
	keyIdx, err := KeyIndexes(source, key)
	if err != nil {
		return nil, err
	}
	rr := &replayRun{
		Replay: r, t: t, id: t.ID, hsnap: hsnap, source: source, conform: newConformer(hs, HistorySchema(source)),
		key: key, keyIdx: keyIdx, keepRows: keepRows, mode: mode,
		seed: maphash.MakeSeed(), sumSeeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		perKey: verifyKeyBytes,
	}
	if keepRows || mode != ModeCurrent {
		rr.perKey = rebuildKeyBytes
	}
	return rr, nil
}

// target is how many keys the next pass should hold.
func (rr *replayRun) target() float64 {
	return passFill * min(float64(rr.MaxKeys), float64(rr.MaxBytes)/rr.perKey)
}

// appendKeyCode appends the code of the key of row, the values at keyIdx.
func appendKeyCode(dst []byte, row []any, keyIdx []int) ([]byte, error) {
	for _, i := range keyIdx {
		var err error
		if dst, err = appendCode(dst, row[i], codeKey); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// plan returns the plan of the passes, or nil when the record counts of the
// history (and of other, the state table, for a verify) show that one pass
// holds every key. Otherwise it samples the keys of both tables.
func (rr *replayRun) plan(ctx context.Context, other *delta.Snapshot) (*passPlan, error) {
	records, ok := rr.hsnap.NumRecords()
	if other != nil {
		n, ok2 := other.NumRecords()
		records, ok = records+n, ok && ok2
	}
	if ok && float64(records) <= rr.target() {
		return nil, nil
	}
	sample := newKeySample(sampleKeys, rr.seed)
	historyRows, err := rr.sampleKeys(ctx, rr.hsnap, sample)
	if err != nil {
		return nil, err
	}
	if other != nil {
		if _, err := rr.sampleKeys(ctx, other, sample); err != nil {
			return nil, err
		}
	}
	p := newPassPlan(sample)
	p.historyRows = historyRows
	rr.Logger.InfoContext(ctx, "replay planned from a sample of the keys", "table", rr.id,
		"keys", int64(sample.distinct()), "passes", p.passes(rr.target()))
	return p, nil
}

// sampleKeys adds the keys of every row of a table to sample, reading only
// the key columns, and returns how many rows it read. Key columns the
// table lacks read as null.
func (rr *replayRun) sampleKeys(ctx context.Context, snap *delta.Snapshot, sample *keySample) (int64, error) {
	schema := snap.Schema()
	var cols []string
	var at []int // position of each key column in the projected row, or -1
	for _, i := range rr.keyIdx {
		f, ok := schema.Field(rr.source.Fields[i].Name)
		if !ok {
			at = append(at, -1)
			continue
		}
		at = append(at, len(cols))
		cols = append(cols, f.Name)
	}
	if len(cols) == 0 {
		cols = []string{schema.Fields[0].Name} // for the count
	}
	key := make([]any, len(at))
	var code []byte
	var rows int64
	for _, f := range snap.Files() {
		err := delta.ReadFile(ctx, snap.Store(), snap.Metadata(), f, delta.ReadOptions{Columns: cols}, func(row []any) error {
			rows++
			for i, j := range at {
				key[i] = nil
				if j >= 0 {
					key[i] = row[j]
				}
			}
			var err error
			if code, err = appendCodes(code[:0], key, codeKey); err != nil {
				return err
			}
			sample.add(code)
			return nil
		})
		if err != nil {
			return rows, fmt.Errorf("sample the keys of %s: %w", snap.Store().URL(), err)
		}
	}
	return rows, nil
}

// pass is one range of keys and what the history says of them.
type pass struct {
	n   int
	rng keyRange
	tab *keyTable
	// rows counts the history rows read; without a sample to count them,
	// the first pass reads every row (countsAll).
	rows      int64
	countsAll bool
	start     time.Time
}

// newPass starts the pass after prev (nil for the first).
func (rr *replayRun) newPass(plan *passPlan, prev *pass) *pass {
	p := &pass{tab: newKeyTable(rr.seed, rr.keepRows || rr.mode != ModeCurrent), start: time.Now(), countsAll: prev == nil && plan == nil}
	if prev != nil {
		p.n = prev.n + 1
		p.rng.setLo(prev.rng.hi)
	}
	if hi := plan.hi(p.rng.lo, rr.target()); hi != nil {
		p.rng.setHi(hi)
	}
	return p
}

// last reports whether p's range reaches the last key.
func (p *pass) last() bool { return p.rng.hi == nil }

// done records what the pass measured for planning the next one.
func (rr *replayRun) done(ctx context.Context, p *pass, attrs ...any) {
	if n := p.tab.len(); n > 0 {
		rr.perKey = max(rr.perKey*0.5, float64(p.tab.bytes)/float64(n))
	}
	rr.Logger.InfoContext(ctx, "replay pass done", append([]any{"table", rr.id, "pass", p.n + 1, "keys", p.tab.len(),
		"bytes", p.tab.bytes, "history_rows_read", p.rows, "last", p.last(), "elapsed", time.Since(p.start).Round(time.Millisecond)}, attrs...)...)
}

// scanHistory reads the history rows of p's range into p.tab: per key the
// change with the greatest order wins (the first read of equal ones, as
// files and rows come in order), and what the run keeps of it. When the
// table outgrows the bounds, the range ends at its median key instead and
// the keys above are dropped, for a later pass.
func (rr *replayRun) scanHistory(ctx context.Context, p *pass) error {
	n := len(historyMeta)
	keyIdx := make([]int, len(rr.keyIdx))
	for i, k := range rr.keyIdx {
		keyIdx[i] = n + k
	}
	first := rr.source.Fields[rr.keyIdx[0]].Name
	var code []byte
	for _, f := range rr.hsnap.Files() {
		ro := delta.ReadOptions{RowGroupFilter: p.rng.rowGroupFilter(f, first, !p.countsAll)}
		err := delta.ReadFile(ctx, rr.t.History, rr.hsnap.Metadata(), f, ro, func(row []any) error {
			p.rows++
			h, err := rr.conform.row(row)
			if err != nil {
				return err
			}
			if code, err = appendKeyCode(code[:0], h, keyIdx); err != nil {
				return err
			}
			if !p.rng.contains(code) {
				return nil
			}
			c, err := ChangeFromHistory(h, rr.source, rr.keyIdx)
			if err != nil {
				return err
			}
			var flags uint8
			if c.Delete {
				flags = entDelete
			}
			i, ok := p.tab.find(code)
			newer := true
			switch {
			case !ok:
				i = p.tab.insert(code, c.Order, flags)
			case bytes.Compare(c.Order, p.tab.orderOf(i)) > 0:
				p.tab.setOrder(i, c.Order)
				p.tab.entry(i).flags = flags
			default:
				newer = false
			}
			switch {
			case rr.mode != ModeCurrent:
				err = rr.collect(p.tab, i, c)
			case newer:
				err = rr.keep(p.tab, i, c)
			}
			if err != nil {
				return fmt.Errorf("key %s: %w", c.Text(), err)
			}
			if (p.tab.len() > rr.MaxKeys || p.tab.bytes > rr.MaxBytes) && p.tab.len() > 1 {
				cut := p.tab.median()
				p.tab = p.tab.below(cut)
				p.rng.setHi(cut)
				rr.Logger.InfoContext(ctx, "replay pass outgrew its bounds; its range ends at its median key", "table", rr.id, "pass", p.n+1, "keys", p.tab.len())
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("history of %s: %w", rr.id, err)
		}
	}
	return nil
}

// conformer is Conform between two schemas, compared once: the rows of
// most tables need nothing done.
type conformer struct {
	from, to value.StructType
	same     bool
}

func newConformer(from, to value.StructType) conformer {
	return conformer{from: from, to: to, same: value.Equal(from, to)}
}

func (c conformer) row(row []any) ([]any, error) {
	if c.same {
		return row, nil
	}
	return Conform(row, c.from, c.to)
}

// stateTail is the metadata columns (stateMeta) of the state row of c.
func stateTail(c Change) [4]any {
	return [4]any{c.SourceTS, nullIfEmpty(c.ChangeType), c.Position, c.Order}
}

// keep records what the run needs of the winning change c of entry i: the
// sum of its state row for a verify, the code of its state or tombstone
// row for a rebuild.
func (rr *replayRun) keep(tab *keyTable, i int32, c Change) error {
	if !rr.keepRows {
		if c.Delete {
			tab.entry(i).sum = [16]byte{}
			return nil
		}
		tail := stateTail(c)
		sum, err := rr.sum(c.Row, tail[:])
		tab.entry(i).sum = sum
		return err
	}
	var err error
	buf := rr.buf[:0]
	if c.Delete {
		buf, err = appendCodes(buf, c.Key, codeExact)
		if err == nil {
			buf, err = appendCodes(buf, []any{c.Order, c.Position, c.SourceTS}, codeExact)
		}
	} else {
		tail := stateTail(c)
		buf, err = appendCodes(buf, c.Row, codeExact)
		if err == nil {
			buf, err = appendCodes(buf, tail[:], codeExact)
		}
	}
	rr.buf = buf
	if err != nil {
		return err
	}
	tab.setRow(i, buf)
	return nil
}

// sum is a 128-bit hash of the values of row then tail, equal for two rows
// exactly when value.EqualValues holds each of their columns equal (up to
// hash collisions).
func (rr *replayRun) sum(row, tail []any) ([16]byte, error) {
	var out [16]byte
	buf, err := appendCodes(rr.buf[:0], row, codeEqual)
	if err == nil {
		buf, err = appendCodes(buf, tail, codeEqual)
	}
	rr.buf = buf
	if err != nil {
		return out, err
	}
	h1, h2 := maphash.Bytes(rr.sumSeeds[0], buf), maphash.Bytes(rr.sumSeeds[1], buf)
	for i := range 8 {
		out[i], out[8+i] = byte(h1>>(8*i)), byte(h2>>(8*i))
	}
	return out, nil
}
