package cdc

// Mode scd2 (issue 16): one row per version of a key, a slowly changing
// dimension of type 2.
//
// The rule (scd2Rows) takes a key's changes in ordering-key order: an
// upsert opens a version unless its source columns equal the open
// version's (collapsed: nothing changed); a delete closes the open version
// and opens none; a backfill row whose source timestamp is later than the
// key's next change opens none (the CDC changes cover it). A version's
// _ds_valid_from is the source timestamp of the change that opened it,
// _ds_valid_to that of the change that closed it (null while open), and
// _ds_is_current marks the open version of a live key.
//
// "The key's next change" of a backfill row is read as its next CDC change,
// which is the key's first, since backfill rows sort before every CDC
// change. The two readings differ only for a key with several backfill
// rows (a backfill run again), and there the literal one would let a row
// open a version closed by a change older than the row, an interval that
// ends before it begins, whenever the backfill row after it opens none.
// Compared with the first CDC change, the versions of backfill rows keep
// their intervals ordered: they begin in source-time order and all end by
// the first CDC change.
//
// How the merge gets a key's neighbouring changes. A late change lands
// between two changes already merged, and the versions around it depend on
// changes the table does not show: a collapsed upsert may open a version
// once a different change lands before it, and a backfill row that opened
// nothing may open one once an earlier CDC change arrives. So the merge
// needs every change of a touched key, collapsed or not, with its values.
// The history table holds exactly that, every event once, so the merge
// reads the touched keys' changes from the history (the files and row
// groups whose key bounds can hold one of them, as the state lookup
// prunes), adds the batch's, and applies the rule again to each touched
// key as a whole: the key's versions after the batch are the rule's,
// whatever order the changes came in, and a key whose versions come out
// equal to the stored ones is not rewritten. A side table of per-key
// change summaries would read less where history files are not clustered
// by key, but it would be a fourth table to keep exactly once; reading the
// history needs nothing new and cannot disagree with verify, which replays
// the same history under the same rule.
//
// Most batches need no history at all: CDC moves on, and a key's new
// changes come after all its earlier ones. The key's last version records
// the order of the key's last change of any kind (ColLastOrder; for a key
// without versions, the tombstone table records its last delete), and
// when every change of the batch is newer
// the rule only extends the stored versions (scd2Extend: close or keep
// the open one, open new ones). Only the keys with a late change, or
// whose last change is a backfill row, read their history (extendsKey).
//
// The lookup reads first the state files that may hold an open version,
// skipping those whose statistics prove they hold none (no null
// ColValidTo): compaction keeps closed versions in files of their own
// (CompactionOptions), so most of an scd2 table's rows are not read. A key
// whose open version it finds and that the batch extends needs nothing
// else: the open version is the key's last, and extending changes none
// before it. The others read the closed files too: a deleted key's last
// version is closed and records its last change, and a late change may
// alter any version.
//
// A step replaces only the versions whose rows change: the open version
// it closes (or whose ColLastOrder moves), and those a late change alters;
// the others stay where they lie (changedVersions). The plan names the
// replaced rows by position (statePlan.byPosition), so a deletion vector
// marks just them and a copy-on-write rewrite keeps the key's other
// versions, where dropping every row of the key would write them again.
//
// Tombstones are recorded as in mode current (a key whose last change is
// a delete), so that rebuild and the other modes agree on them.

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/value"
)

// SCD2 columns, after StateSchema's (which describe the change that opened
// the version).
const (
	ColValidFrom = "_ds_valid_from"
	ColValidTo   = "_ds_valid_to"
	ColIsCurrent = "_ds_is_current"
	// ColLastOrder is, on a key's last version only, the ordering key of
	// the key's last change of any kind (an upsert that opened nothing, a
	// delete): what tells the merge that a batch only adds changes after
	// every change the key has, which it can apply without the key's
	// history (see applySCD2).
	ColLastOrder = "_ds_last_order"
)

// scd2Meta follow stateMeta in an scd2 table.
var scd2Meta = []value.Field{
	{Name: ColValidFrom, Type: value.Timestamp, Nullable: false},
	{Name: ColValidTo, Type: value.Timestamp, Nullable: true},
	{Name: ColIsCurrent, Type: value.Boolean, Nullable: false},
	{Name: ColLastOrder, Type: value.Binary, Nullable: true},
}

// SCD2Schema is an scd2 table's schema for a source schema.
func SCD2Schema(source value.StructType) value.StructType {
	return stateSchemaWith(source, scd2Meta)
}

// isBackfill reports whether an ordering key is a backfill row's: backfill
// keys start with their own class byte, below every CDC key's.
func isBackfill(order []byte) bool { return len(order) > 0 && order[0] == 0x00 }

// scd2Row is the layout of a version row: the source columns, stateMeta
// (the opening change's), then scd2Meta.
type scd2Row struct{ n int } // source columns

func (l scd2Row) validFrom() int { return l.n + len(stateMeta) }
func (l scd2Row) validTo() int   { return l.validFrom() + 1 }
func (l scd2Row) current() int   { return l.validFrom() + 2 }
func (l scd2Row) lastOrder() int { return l.validFrom() + 3 }

// scd2Rows are the versions a key's changes imply (sorted by ordering key,
// each order once), as rows of SCD2Schema of the changes' source schema,
// in ordering-key order: the rule of the file comment.
func scd2Rows(changes []Change) [][]any {
	return scd2Extend(nil, changes)
}

// scd2Extend applies the rule to changes that all come after every change
// that made rows (a key's versions, the last one open when its
// ColIsCurrent is set): the rows it returns are rows with the last one
// closed or extended, then the versions changes open. With no rows it is
// the whole rule.
func scd2Extend(rows [][]any, changes []Change) [][]any {
	if len(changes) == 0 {
		return rows
	}
	l := scd2Row{n: len(changes[0].Row)}
	open := -1
	if k := len(rows) - 1; k >= 0 {
		rows[k] = slices.Clone(rows[k])
		rows[k][l.lastOrder()] = nil
		if rows[k][l.current()] == true {
			open = k
			rows[k][l.current()] = false
		}
	}
	// Backfill rows sort before every CDC change, so the next CDC change
	// of each is the key's first.
	firstCDC := slices.IndexFunc(changes, func(c Change) bool { return !isBackfill(c.Order) })
	for _, c := range changes {
		if c.Delete {
			if open >= 0 {
				rows[open][l.validTo()] = c.SourceTS
				open = -1
			}
			continue
		}
		if isBackfill(c.Order) && firstCDC >= 0 && c.SourceTS > changes[firstCDC].SourceTS {
			continue // read after the key's next CDC change, which covers it
		}
		if open >= 0 && sameValues(rows[open][:l.n], c.Row) {
			continue // nothing changed
		}
		if open >= 0 {
			rows[open][l.validTo()] = c.SourceTS
		}
		tail := stateTail(c)
		row := make([]any, 0, l.n+len(stateMeta)+len(scd2Meta))
		row = append(append(append(row, c.Row...), tail[:]...), c.SourceTS, nil, false, nil)
		rows = append(rows, row)
		open = len(rows) - 1
	}
	if open >= 0 {
		rows[open][l.current()] = true
	}
	if k := len(rows) - 1; k >= 0 {
		rows[k][l.lastOrder()] = changes[len(changes)-1].Order
	}
	return rows
}

// sameValues reports whether two rows hold equal values column by column.
func sameValues(a, b []any) bool {
	return slices.EqualFunc(a, b, value.EqualValues)
}

// scd2Key is what one step brings of a key and what the tables hold of it.
type scd2Key struct {
	key     []any
	keyText string
	changes []Change        // the batch's and the history's, in the table's source schema
	batch   map[string]bool // orders of the batch's changes
	stored  [][]any         // the key's version rows, in the step's state schema
	at      []rowAt         // where they lie
	// fast: every change of the batch comes after every change the key
	// has, so the rule extends the stored versions (scd2Extend) and the
	// key's history is not read.
	fast bool
}

// planSCD2 applies the rule to each touched key and plans the rows that
// change: the versions that differ from the stored ones are dropped (by
// position) and written again, the others stay. tombOrder is each key's
// last recorded delete. It does no I/O.
func planSCD2(keys []*scd2Key, tombOrder map[string]*stored) statePlan {
	p := statePlan{touched: map[string]*roaring64.Bitmap{}, dropKeys: map[string]bool{}, rows: [][]any{}, byPosition: true}
	for _, k := range keys {
		changes := inOrder(k.changes)
		var rows [][]any
		if k.fast {
			rows = scd2Extend(slices.Clone(k.stored), changes)
		} else {
			rows = scd2Rows(changes)
		}
		last := changes[len(changes)-1]
		buried := false
		if last.Delete && k.batch[string(last.Order)] {
			if t := tombOrder[k.keyText]; t == nil || t.tombOrder == nil || bytes.Compare(last.Order, t.tombOrder) > 0 {
				p.keys = append(p.keys, last)
				p.verdicts = append(p.verdicts, Bury)
				buried = true
			}
		}
		var ins, upd, del int64
		switch {
		case k.fast && len(k.stored) > 0:
			// The last stored version changes (it records the key's last
			// change), those before it do not, the rest are new.
			ins, upd = int64(len(rows)-len(k.stored)), 1
		case slices.EqualFunc(rows, k.stored, sameValues):
			if buried && len(rows) == 0 {
				p.buried++
			} else {
				p.stale++
			}
			continue
		default:
			ins, upd, del = versionChanges(k.stored, rows)
		}
		p.inserted += ins
		p.updated += upd
		p.deleted += del
		var gone []rowAt
		if n := len(k.stored); k.fast && n > 0 {
			// scd2Extend changed the last stored version (its record of
			// the key's last change moves) and none before it.
			rows, gone = rows[n-1:], k.at[n-1:]
		} else {
			rows, gone = changedVersions(k.stored, k.at, rows)
		}
		if len(gone) > 0 {
			p.dropKeys[k.keyText] = true
			p.dropFirsts = append(p.dropFirsts, k.key[0])
			p.touch(gone)
		}
		p.rows = append(p.rows, rows...)
	}
	return p
}

// changedVersions compares a key's stored versions (at: where they lie)
// with its versions after the step: it returns the new versions that are
// not stored as they are (to write) and where the stored versions lie
// that are not among the new ones (to drop). A version stored unchanged
// stays where it is: most steps close the open version and add new ones,
// and writing the closed versions before it again would cost rows written
// and rows marked (or copied) for nothing.
//
// Both lists are sorted by the order of the change that opened each
// version, so one merge-like walk pairs them.
func changedVersions(stored [][]any, at []rowAt, rows [][]any) (write [][]any, drop []rowAt) {
	i := 0
	for _, r := range rows {
		for i < len(stored) && bytes.Compare(scd2Order(stored[i]), scd2Order(r)) < 0 {
			drop = append(drop, at[i])
			i++
		}
		if i < len(stored) && bytes.Equal(scd2Order(stored[i]), scd2Order(r)) && sameValues(stored[i], r) {
			i++ // stored as it is: stays
			continue
		}
		write = append(write, r)
	}
	return write, append(drop, at[i:]...)
}

// versionChanges counts the versions added, changed and removed from old
// to new, a version being known by the order of the change that opened it.
func versionChanges(old, new [][]any) (inserted, updated, deleted int64) {
	byOrder := map[string][]any{}
	for _, r := range old {
		byOrder[string(scd2Order(r))] = r
	}
	for _, r := range new {
		o, ok := byOrder[string(scd2Order(r))]
		switch {
		case !ok:
			inserted++
		case !sameValues(o, r):
			updated++
		}
		delete(byOrder, string(scd2Order(r)))
	}
	return inserted, updated, int64(len(byOrder))
}

// scd2Order is the ordering key of the change that opened a version row.
func scd2Order(row []any) []byte {
	b, _ := row[len(row)-len(scd2Meta)-1].([]byte) // stateMeta's last column
	return b
}

// applySCD2 is applyState in mode scd2: lookup (the touched keys' version
// rows, their changes in the history, their tombstones), plan (planSCD2),
// execute (the tombstone then the state commit, as in mode current).
func (st *stateStep) applySCD2(ctx context.Context, res *Result, historyCommitted <-chan struct{}) error {
	keys, err := st.scd2Keys()
	if err != nil {
		return err
	}
	res.Keys = int64(len(keys))
	res.Collapsed = res.Events - res.Keys
	byText := make(map[string]*scd2Key, len(keys))
	probe := make([]Change, len(keys))
	tombs := make(map[string]*stored, len(keys))
	for i, k := range keys {
		byText[k.keyText] = k
		probe[i] = Change{Key: k.key, KeyText: k.keyText}
		tombs[k.keyText] = &stored{}
	}
	closed, open := splitClosedFiles(st.stateSnap.Files())
	if st.candidates, err = st.scd2Lookup(ctx, open, probe, byText); err != nil {
		return err
	}
	tombFiles := prune(st.tombSnap.Files(), st.keyNames[0], st.keyTypes[0], probe)
	err = lookup(ctx, st.tombSnap, tombFiles, st.keyNames, probe, tombs, nil, func(s *stored, order []byte, _ string, _ int64) {
		if s.tombOrder == nil || bytes.Compare(order, s.tombOrder) > 0 {
			s.tombOrder = order
		}
	})
	if err != nil {
		return fmt.Errorf("tombstone lookup: %w", err)
	}
	// A key whose open version the lookup found, and that the batch
	// extends, needs no more: its open version is its last (the rule
	// opens versions in order and closes all but the last), and the
	// extension changes no version before it. The others need every
	// version, closed ones included (a deleted key's last version records
	// its last change; a late change may alter any).
	whole := map[string]*scd2Key{}
	var wholeProbe []Change
	for i, k := range keys {
		if !hasOpenVersion(k) || !extendsKey(k, tombs[k.keyText].tombOrder) {
			whole[k.keyText] = k
			wholeProbe = append(wholeProbe, probe[i])
		}
	}
	if len(wholeProbe) > 0 {
		read, err := st.scd2Lookup(ctx, closed, wholeProbe, whole)
		if err != nil {
			return err
		}
		st.candidates = append(st.candidates, read...)
	}
	// Only the keys a batch does not simply extend need their history.
	slow := map[string]*scd2Key{}
	var slowProbe []Change
	for i, k := range keys {
		if k.fast = extendsKey(k, tombs[k.keyText].tombOrder); !k.fast {
			slow[k.keyText] = k
			slowProbe = append(slowProbe, probe[i])
		}
	}
	st.known.publish(scd2Known(st.tombSnap, keys, tombs))
	if len(slow) > 0 {
		if err := st.keyHistory(ctx, slowProbe, slow); err != nil {
			return err
		}
	}
	res.FilesRead = len(st.candidates)
	return st.commitPlan(ctx, planSCD2(keys, tombs), res, historyCommitted)
}

// scd2Known is what an scd2 lookup tells the history's duplicate check:
// a key's last version records the order of its last change of any kind
// (lastKnownOrder).
func scd2Known(tomb *delta.Snapshot, keys []*scd2Key, tombs map[string]*stored) knownOrders {
	k := newKnownOrders(tomb, len(keys))
	for _, key := range keys {
		last, ok := lastKnownOrder(key, tombs[key.keyText].tombOrder)
		if !ok {
			k.unknowable[key.keyText] = true
		}
		k.note(key.keyText, last)
	}
	return k
}

// lastKnownOrder is the order of k's last change as far as the tables
// tell: the last order recorded on its last version, or its last recorded
// delete (tombOrder); nil when they know nothing of it. ok is false when
// its last version records no order.
func lastKnownOrder(k *scd2Key, tombOrder []byte) (last []byte, ok bool) {
	if n := len(k.stored); n > 0 {
		row := k.stored[n-1]
		if last, _ = row[scd2Row{n: len(row) - len(stateMeta) - len(scd2Meta)}.lastOrder()].([]byte); last == nil {
			return nil, false
		}
	}
	if bytes.Compare(tombOrder, last) > 0 {
		last = tombOrder
	}
	return last, true
}

// extendsKey reports whether the batch's changes of k all come after every
// change the key has, as far as the tables tell (lastKnownOrder). Then the
// versions before the open one cannot change, and neither can backfill
// coverage, unless the key's last change is a backfill row (a batch CDC
// change would then be the key's first, which may cover earlier backfill
// versions): such keys take the history. A key the tables know nothing of
// is new, or has only deletes whose tombstones expired: the trade-off of
// a bounded tombstone table that mode current makes too.
func extendsKey(k *scd2Key, tombOrder []byte) bool {
	last, ok := lastKnownOrder(k, tombOrder)
	if !ok {
		return false
	}
	if last == nil {
		return true
	}
	if isBackfill(last) {
		return false
	}
	for _, c := range k.changes {
		if bytes.Compare(c.Order, last) <= 0 {
			return false
		}
	}
	return true
}

// scd2Keys groups the step's changes by key, sorted by key, their rows in
// the table's source schema.
func (st *stateStep) scd2Keys() ([]*scd2Key, error) {
	idx := map[string]*scd2Key{}
	var out []*scd2Key
	for _, c := range st.b.Changes {
		text := c.Text()
		k := idx[text]
		if k == nil {
			k = &scd2Key{key: c.Key, keyText: text, batch: map[string]bool{}}
			idx[text] = k
			out = append(out, k)
		}
		row, err := conformFor(st.opts.Overwrite, c.Row, st.b.Source, st.stateSource)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", text, err)
		}
		c.Row, c.History = row, nil
		k.changes = append(k.changes, c)
		k.batch[string(c.Order)] = true
	}
	slices.SortFunc(out, func(a, b *scd2Key) int { return value.CompareKeys(a.key, b.key) })
	return out, nil
}

// splitClosedFiles parts state files into those whose statistics prove
// they hold only closed versions (no null ColValidTo: as compaction
// writes them, see CompactionOptions) and the others, which may hold an
// open version. A file that no statistics describe is among the others.
func splitClosedFiles(files []delta.Add) (closed, open []delta.Add) {
	for _, f := range files {
		st, err := delta.ParseStats(f.Stats)
		if n, ok := st.NullCountOf(ColValidTo); err == nil && ok && n == 0 {
			closed = append(closed, f)
		} else {
			open = append(open, f)
		}
	}
	return closed, open
}

// hasOpenVersion reports whether the lookup found k's open version.
func hasOpenVersion(k *scd2Key) bool {
	return slices.ContainsFunc(k.stored, func(row []any) bool {
		return row[scd2Row{n: len(row) - len(stateMeta) - len(scd2Meta)}.validTo()] == nil
	})
}

// scd2Lookup reads the touched keys' version rows, whole, from those of
// files and their row groups whose key bounds can hold one, adding them
// to the keys' stored versions, and returns the files it read.
func (st *stateStep) scd2Lookup(ctx context.Context, files []delta.Add, probe []Change, keys map[string]*scd2Key) ([]delta.Add, error) {
	schema := st.schema(st.stateSource)
	stored := st.stateSnap.Schema()
	keyIdx, err := KeyIndexes(stored, st.keyNames)
	if err != nil {
		return nil, err
	}
	candidates := prune(files, st.keyNames[0], st.keyTypes[0], probe)
	conform := rowConform(st.opts.Overwrite, stored, schema)
	err = readKeyed(ctx, st.stateSnap, candidates, nil, keyIdx, st.keyNames[0], probe, keys, func(k *scd2Key, row []any, path string, pos int64) error {
		r, err := conform(row)
		if err != nil {
			return err
		}
		k.stored = append(k.stored, r)
		k.at = append(k.at, rowAt{path: path, pos: pos})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("state lookup: %w", err)
	}
	for _, k := range keys {
		sortVersions(k)
	}
	return candidates, nil
}

// sortVersions sorts a key's stored versions, and where they lie with
// them, by the order of the change that opened each.
func sortVersions(k *scd2Key) {
	idx := make([]int, len(k.stored))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return bytes.Compare(scd2Order(k.stored[a]), scd2Order(k.stored[b])) })
	stored, at := make([][]any, len(idx)), make([]rowAt, len(idx))
	for i, j := range idx {
		stored[i], at[i] = k.stored[j], k.at[j]
	}
	k.stored, k.at = stored, at
}

// keyHistory adds to each touched key its changes in the history table,
// in the table's source schema, reading the history files and row groups
// whose key bounds can hold a touched key. A retried step finds its own
// changes there too; inOrder keeps each order once.
func (st *stateStep) keyHistory(ctx context.Context, probe []Change, keys map[string]*scd2Key) error {
	hsnap, err := delta.Open(st.t.History).Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	from, to := hsnap.Schema(), HistorySchema(st.stateSource)
	keyIdx, err := KeyIndexes(from, st.keyNames)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	srcKey, err := KeyIndexes(st.stateSource, st.keyNames)
	if err != nil {
		return err
	}
	files := prune(hsnap.Files(), st.keyNames[0], st.keyTypes[0], probe)
	conform := rowConform(st.opts.Overwrite, from, to)
	err = readKeyed(ctx, hsnap, files, nil, keyIdx, st.keyNames[0], probe, keys, func(k *scd2Key, row []any, _ string, _ int64) error {
		h, err := conform(row)
		if err != nil {
			return err
		}
		c, err := ChangeFromHistory(h, st.stateSource, srcKey)
		if err != nil {
			return err
		}
		c.History = nil
		k.changes = append(k.changes, c)
		return nil
	})
	if err != nil {
		return fmt.Errorf("history of the touched keys: %w", err)
	}
	return nil
}
